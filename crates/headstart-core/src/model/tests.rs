use super::*;
use serde_json::json;

#[test]
fn usage_serializes_with_computed_total_and_ignores_given_total() {
    let usage: Usage = serde_json::from_value(json!({"input": 10, "output": 50, "total": 3})).unwrap();
    assert_eq!(usage.total(), 60);
    assert_eq!(
        serde_json::to_value(usage).unwrap(),
        json!({"input": 10, "output": 50, "cache_read": 0, "cache_write": 0, "total": 60})
    );
    assert!(serde_json::from_value::<Usage>(json!({"inptu": 1})).is_err());
}

#[test]
fn tool_call_serializes_in_report_shape() {
    let block = ContentBlock::ToolCall(ToolCall {
        id: "call_1".into(),
        name: "lookup".into(),
        arguments: ToolArguments::parse(r#"{"q": "rust"}"#),
        provider_async: false,
    });
    let value = serde_json::to_value(&block).unwrap();
    assert_eq!(
        value,
        json!({"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"q": "rust"}})
    );
    assert_eq!(serde_json::from_value::<ContentBlock>(value).unwrap(), block);
}

#[test]
fn invalid_arguments_keep_their_text_verbatim_and_round_trip() {
    let args = ToolArguments::parse("{\"q\": ");
    let ToolArguments::Invalid { raw, error } = &args else {
        panic!("expected invalid, got {args:?}")
    };
    assert_eq!(raw, "{\"q\": ");
    assert!(error.contains("EOF"), "{error}");
    let back: ToolArguments = serde_json::from_value(serde_json::to_value(&args).unwrap()).unwrap();
    assert_eq!(back, args);
}

#[test]
fn arguments_nested_past_the_depth_limit_are_invalid_and_round_trip_as_text() {
    let nested = |depth: usize| format!("{{\"a\": {}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    assert!(matches!(
        ToolArguments::parse(&nested(MAX_ARGUMENT_DEPTH)),
        ToolArguments::Valid(_)
    ));
    let deep = nested(MAX_ARGUMENT_DEPTH + 1);
    let args = ToolArguments::parse(&deep);
    assert_eq!(
        args,
        ToolArguments::Invalid {
            raw: deep.clone(),
            error: "arguments are nested more than 64 levels deep".to_owned()
        }
    );
    // Stored as its text, so the message it is in reads back whatever the depth limit of the reader.
    let message = serde_json::to_string(&ToolCall {
        id: "c".into(),
        name: "t".into(),
        arguments: args.clone(),
        provider_async: false,
    })
    .unwrap();
    assert_eq!(serde_json::from_str::<ToolCall>(&message).unwrap().arguments, args);
    // The same through an override value, and objects nested inside objects count too.
    let value: Value = serde_json::from_str(&deep).unwrap();
    assert!(matches!(
        ToolArguments::from_value(value),
        ToolArguments::Invalid { .. }
    ));
    let objects = format!(
        "{}1{}",
        "{\"a\": ".repeat(MAX_ARGUMENT_DEPTH + 1),
        "}".repeat(MAX_ARGUMENT_DEPTH + 1)
    );
    assert!(matches!(ToolArguments::parse(&objects), ToolArguments::Invalid { .. }));
}

#[test]
fn empty_arguments_are_an_empty_object_and_non_objects_are_invalid() {
    assert_eq!(ToolArguments::parse("  "), ToolArguments::Valid(Map::new()));
    assert!(matches!(ToolArguments::parse("[1]"), ToolArguments::Invalid { .. }));
    assert!(matches!(ToolArguments::parse("{} {}"), ToolArguments::Invalid { .. }));
    assert!(matches!(
        ToolArguments::from_value(json!(3)),
        ToolArguments::Invalid { .. }
    ));
    // A stored invalid text that happens to be an object string stays invalid.
    let back: ToolArguments = serde_json::from_value(json!("{}")).unwrap();
    assert!(matches!(back, ToolArguments::Invalid { .. }));
}

#[test]
fn messages_carry_their_role_tag() {
    let msg = Message::User(UserMessage::new("hi"));
    assert_eq!(
        serde_json::to_value(&msg).unwrap(),
        json!({"role": "user", "text": "hi"})
    );
    assert_eq!(joined_text(&[ContentBlock::text("a"), ContentBlock::text("b")]), "a\nb");
}
