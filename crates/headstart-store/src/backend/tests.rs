//! Tests of the backends' building blocks.

use headstart_core::model::Message;

use super::EncodedMessage;
use crate::conformance::data::{call, prefix, result};

/// A message encoded by reference is stored exactly as the `Message` holding it (its role column included).
#[test]
fn encoded_messages_are_the_message_encoding() {
    let lookup = call("c1", "lookup");
    let fragment = prefix("turn-1", "looking", std::slice::from_ref(&lookup));
    let user = headstart_core::model::UserMessage::new("hello");
    let tool_result = result(&lookup, "found");
    let cases = [
        (EncodedMessage::user(&user, "w"), Message::User(user.clone())),
        (
            EncodedMessage::assistant(&fragment, "w"),
            Message::Assistant(fragment.clone()),
        ),
        (
            EncodedMessage::tool_result(&tool_result, "w"),
            Message::ToolResult(tool_result.clone()),
        ),
    ];
    for (encoded, message) in cases {
        let encoded = encoded.expect("encode");
        assert_eq!(
            encoded.body,
            serde_json::to_string(&message).expect("encode the message")
        );
        assert_eq!(encoded.role, message.role());
    }
}
