use super::*;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, Path::new("."))
}

#[test]
fn unknown_keys_name_the_key_and_path() {
    let cases = [
        (r#"{"nmae": "x"}"#, "unknown key nmae at the top level"),
        (
            r#"{"tools": [{"name": "t", "behavior": {"delay": 3}}]}"#,
            "unknown key delay at tools[0].behavior",
        ),
        (
            r#"{"tools": [{"name": "t", "by_call": {"c1": {"reslt": {}}}}]}"#,
            "unknown key reslt at tools[0].by_call.c1",
        ),
        (r#"{"config": {"parallel": true}}"#, "unknown key parallel at config"),
        (
            r#"{"turns": [{"log": "a", "evnts": []}]}"#,
            "unknown key evnts at turns[0]",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(parse(text).unwrap_err().to_string(), message);
    }
}

#[test]
fn type_errors_name_the_value_path() {
    let cases = [
        (
            r#"{"tools": [{"name": 3}]}"#,
            "invalid scenario at tools[0].name: invalid type: integer `3`, expected a string",
        ),
        (
            r#"{"hooks": {"after": {"c1": {"is_error": "yes"}}}}"#,
            "invalid scenario at hooks.after.c1.is_error: invalid type: string \"yes\", expected a boolean",
        ),
        (
            r#"{"tools": [{"name": "t", "behavior": {"updates": [{"text": "x"}]}}]}"#,
            "invalid scenario at tools[0].behavior.updates[0]: missing field `at_ms`",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(parse(text).unwrap_err().to_string(), message);
    }
}

#[test]
fn type_errors_and_bad_turns_are_errors_not_panics() {
    assert!(parse(r#"{"tools": [{"name": 3}]}"#).is_err());
    assert!(parse(r#"{"turns": [{}]}"#)
        .unwrap_err()
        .to_string()
        .contains("exactly one"));
    assert!(parse(r#"{"turns": [{"log": "does-not-exist.jsonl"}]}"#)
        .unwrap_err()
        .to_string()
        .contains("cannot read"));
    assert!(parse(r#"{"turns": [{"events": [{"type": "bogus"}]}]}"#)
        .unwrap_err()
        .to_string()
        .contains("events[0]"));
    assert!(parse("[]").is_err());
    assert!(parse(r#"{"tools": [{"name": "t", "behavior": {"error": "a", "panic": "b"}}]}"#).is_err());
}

#[test]
fn by_call_overrides_merge_field_by_field() {
    let scenario = parse(
        r#"{"tools": [{"name": "t", "behavior": {"delay_ms": 300, "result": {"text": "found"}},
            "by_call": {"c2": {"delay_ms": 100}, "c3": {"error": "no"}}}]}"#,
    )
    .unwrap();
    let tool = &scenario.tools[0];
    let c2 = tool.behavior.merged(&tool.by_call["c2"]);
    assert_eq!(c2.delay_ms, 100);
    assert_eq!(
        c2.outcome,
        Outcome::Result(ResultSpec {
            text: "found".into(),
            ..ResultSpec::default()
        })
    );
    let c3 = tool.behavior.merged(&tool.by_call["c3"]);
    assert_eq!((c3.delay_ms, c3.outcome), (300, Outcome::Error("no".into())));
}
