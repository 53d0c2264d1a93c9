use super::error_text::provider_message;
use super::*;
use crate::WireFormat;

#[test]
fn urls_per_format() {
    let config = |format| HttpModelConfig::new(format, "m").with_base_url("http://h/v1/");
    assert_eq!(config(WireFormat::OpenAiChat).url(), "http://h/v1/chat/completions");
    assert_eq!(config(WireFormat::OpenAiResponses).url(), "http://h/v1/responses");
    assert_eq!(config(WireFormat::Anthropic).url(), "http://h/v1/messages");
    assert_eq!(
        config(WireFormat::Gemini).url(),
        "http://h/v1/models/m:streamGenerateContent?alt=sse"
    );
}

#[test]
fn provider_messages_are_extracted_from_error_bodies() {
    assert_eq!(
        provider_message(r#"{"error": {"message": "bad key", "type": "invalid_request_error"}}"#),
        "bad key (invalid_request_error)"
    );
    assert_eq!(
        provider_message(r#"[{"error": {"code": 400, "message": "oops", "status": "INVALID_ARGUMENT"}}]"#),
        "oops (400)"
    );
    assert_eq!(provider_message("upstream connect error"), "upstream connect error");
    assert_eq!(provider_message(""), "(empty body)");
}

#[test]
fn a_missing_key_variable_is_a_configuration_error() {
    let config =
        HttpModelConfig::new(WireFormat::Anthropic, "m").with_api_key_env(Some("HEADSTART_TEST_SURELY_UNSET_VARIABLE"));
    let err = HttpModel::new(config).unwrap_err();
    assert!(
        err.to_string().contains("HEADSTART_TEST_SURELY_UNSET_VARIABLE"),
        "{err}"
    );
    let model = HttpModel::new(HttpModelConfig::new(WireFormat::Anthropic, "m").with_api_key_env(None)).unwrap();
    assert!(format!("{model:?}").contains("api_key: None"));
}

#[test]
fn overrides_change_the_model_and_system_prompt_and_nothing_else() {
    let mut config = HttpModelConfig::new(WireFormat::Gemini, "base").with_api_key_env(None);
    config.system = Some("worker's".to_owned());
    let base = HttpModel::new(config).unwrap();
    let same = base.with_overrides(None, None);
    assert_eq!(same.request_body(&[], &[]), base.request_body(&[], &[]));
    let both = base.with_overrides(Some("other"), Some("session's"));
    assert_eq!(both.config().model, "other");
    assert_eq!(both.config().system.as_deref(), Some("session's"));
    // The model is part of a Gemini URL: the override reaches it.
    assert!(
        both.config().url().contains("/models/other:"),
        "{}",
        both.config().url()
    );
    let model_only = base.with_overrides(Some("other"), None);
    assert_eq!(model_only.config().system.as_deref(), Some("worker's"));
    assert_eq!(base.config().model, "base", "the base model is unchanged");
}
