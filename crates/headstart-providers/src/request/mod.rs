//! Request bodies: the canonical model context (contract §7.3) and the tool definitions, in each wire format.
//!
//! The context is what `headstart_core::context::model_context` produces: user prompts, one merged assistant
//! message per response (followed by its tool results in call order), tool results. Notes per format:
//!
//! - Invalid tool call arguments (kept verbatim in the transcript) are sent back as their raw text where the
//!   format carries arguments as a string (OpenAI), and as `{}` where it needs an object (Anthropic, Gemini); the
//!   call's error result tells the model what was wrong.
//! - Thinking blocks are sent back only where the format needs them and they carry the provider's signature:
//!   Anthropic `thinking` blocks with a signature; Responses reasoning items whose signature (see
//!   [`crate::openai_responses`]) carries `encrypted_content` (so no reference to server-side state is made);
//!   Gemini thought signatures, attached to the part that follows them. Chat Completions never gets reasoning back.
//!   Signatures are provider-specific: a transcript started with one provider's thinking blocks cannot be continued
//!   with another provider.
//! - Empty assistant messages (an errored response with no content) are left out.
//!
//! Each format's body is built beside its converter (`anthropic::anthropic_body`, ...); [`build_body`] picks one.

mod cached;
pub(crate) mod settings;
#[cfg(test)]
mod tests;

use headstart_core::Message;
use serde_json::Value;

pub use crate::anthropic::{anthropic_body, ANTHROPIC_DEFAULT_MAX_TOKENS};
pub use crate::gemini::gemini_body;
pub use crate::openai_chat::openai_chat_body;
pub use crate::openai_responses::openai_responses_body;
pub use cached::BodyCache;
pub use headstart_core::ToolDefinition;
pub use settings::RequestSettings;

use crate::WireFormat;

/// Builds the streaming request body for `format`.
pub fn build_body<'a>(
    format: WireFormat,
    settings: &RequestSettings,
    context: impl IntoIterator<Item = &'a Message>,
    tools: &[ToolDefinition],
) -> Value {
    let body = match format {
        WireFormat::OpenAiChat => openai_chat_body(settings, context, tools),
        WireFormat::OpenAiResponses => openai_responses_body(settings, context, tools),
        WireFormat::Anthropic => anthropic_body(settings, context, tools),
        WireFormat::Gemini => gemini_body(settings, context, tools),
    };
    with_extra(body, settings)
}

/// `body` with the settings' extra fields set on it (each replacing a field of the same name).
fn with_extra(mut body: Value, settings: &RequestSettings) -> Value {
    if let Value::Object(fields) = &mut body {
        for (key, value) in &settings.extra {
            fields.insert(key.clone(), value.clone());
        }
    }
    body
}
