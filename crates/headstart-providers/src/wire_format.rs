//! The four streaming wire formats, and for each where a request goes, how it carries the API key, and the converter
//! that reads its answer. Each format's own rules live in its module ([`crate::anthropic`], ...); this is the one
//! place that picks among them.

use std::fmt;
use std::str::FromStr;

use reqwest::RequestBuilder;

use crate::converter::{ConvertOptions, Converter, StreamConverter};
use crate::error::ProviderError;
use crate::{anthropic, gemini, openai_chat, openai_responses};

/// The streaming wire formats headstart can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI Chat Completions (`/chat/completions`) and compatible servers (DeepSeek, vLLM, Ollama, gateways).
    OpenAiChat,
    /// OpenAI Responses (`/responses`).
    OpenAiResponses,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Google Gemini (`:streamGenerateContent?alt=sse`).
    Gemini,
}

impl WireFormat {
    /// Every format, in a stable order.
    pub const ALL: [WireFormat; 4] = [
        WireFormat::OpenAiChat,
        WireFormat::OpenAiResponses,
        WireFormat::Anthropic,
        WireFormat::Gemini,
    ];

    /// The provider's name in OpenTelemetry's GenAI semantic conventions (`gen_ai.provider.name`).
    pub fn otel_provider(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => "openai",
            WireFormat::Anthropic => "anthropic",
            WireFormat::Gemini => "gcp.gemini",
        }
    }

    /// The command-line name: `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => "openai-chat",
            WireFormat::OpenAiResponses => "openai-responses",
            WireFormat::Anthropic => "anthropic",
            WireFormat::Gemini => "gemini",
        }
    }

    /// A fresh converter for one response in this format.
    pub fn converter(self, options: &ConvertOptions) -> Box<dyn StreamConverter> {
        let converter: Box<dyn StreamConverter> = match self {
            WireFormat::OpenAiChat => Box::new(Converter::new(openai_chat::ChatDecoder::new(options))),
            WireFormat::OpenAiResponses => Box::new(Converter::new(openai_responses::ResponsesDecoder::default())),
            WireFormat::Anthropic => Box::new(Converter::new(anthropic::AnthropicDecoder::default())),
            WireFormat::Gemini => Box::new(Converter::new(gemini::GeminiDecoder::default())),
        };
        match &options.record {
            Some(recorder) => crate::recorded::recorded(recorder, self.as_str(), converter),
            None => converter,
        }
    }

    /// The provider's public base URL for this format.
    pub fn default_base_url(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => openai_chat::DEFAULT_BASE_URL,
            WireFormat::Anthropic => anthropic::DEFAULT_BASE_URL,
            WireFormat::Gemini => gemini::DEFAULT_BASE_URL,
        }
    }

    /// The environment variable the API key is read from by default.
    pub fn default_api_key_env(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => openai_chat::API_KEY_ENV,
            WireFormat::Anthropic => anthropic::API_KEY_ENV,
            WireFormat::Gemini => gemini::API_KEY_ENV,
        }
    }

    /// The streaming endpoint of `model` below `base_url`.
    pub(crate) fn endpoint(self, base_url: &str, model: &str) -> String {
        let base = base_url.trim_end_matches('/');
        match self {
            WireFormat::OpenAiChat => openai_chat::endpoint(base),
            WireFormat::OpenAiResponses => openai_responses::endpoint(base),
            WireFormat::Anthropic => anthropic::endpoint(base),
            WireFormat::Gemini => gemini::endpoint(base, model),
        }
    }

    /// The format's own headers, with the API key where the format expects it.
    pub(crate) fn headers(self, request: RequestBuilder, key: Option<&str>) -> RequestBuilder {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => openai_chat::headers(request, key),
            WireFormat::Anthropic => anthropic::headers(request, key),
            WireFormat::Gemini => gemini::headers(request, key),
        }
    }
}

impl fmt::Display for WireFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WireFormat {
    type Err = ProviderError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        WireFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "unknown wire format {name:?}; expected one of openai-chat, openai-responses, anthropic, gemini"
                ))
            })
    }
}
