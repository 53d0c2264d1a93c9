//! Which scheduling flags an MCP tool gets, and why: annotations are hints from the server, trusted only when the
//! user says so.

use std::collections::BTreeMap;

use rmcp::model::ToolAnnotations;
use serde::Serialize;

/// How a server's tools are flagged: whether its annotations are believed, and per-tool overrides.
///
/// MCP's annotations (`readOnlyHint`, `idempotentHint`, …) are the server's own claims; the MCP specification says
/// clients must not rely on them for servers they do not trust. So by default every tool is a sync,
/// non-idempotent tool whose calls keep source order with the server's other calls. A trusted server's annotations
/// decide instead (see [`ToolFlags`]), and an [`Override`] beats both.
#[derive(Debug, Clone, Default)]
pub struct ToolPolicy {
    trusted: bool,
    overrides: BTreeMap<String, Override>,
}

impl ToolPolicy {
    /// Annotations ignored (the default).
    pub fn untrusted() -> Self {
        Self::default()
    }

    /// Annotations believed.
    pub fn trusted() -> Self {
        ToolPolicy {
            trusted: true,
            ..Self::default()
        }
    }

    /// Whether annotations are believed.
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// Sets the flags of MCP tool `tool` (its name on the server, before prefixing) that `flags` sets.
    pub fn with_override(mut self, tool: impl Into<String>, flags: Override) -> Self {
        self.overrides.insert(tool.into(), flags);
        self
    }

    /// The overrides, by MCP tool name.
    pub fn overrides(&self) -> &BTreeMap<String, Override> {
        &self.overrides
    }

    /// The flags of one tool of server `server`.
    pub fn flags(&self, server: &str, tool: &str, annotations: Option<&ToolAnnotations>) -> ToolFlags {
        let mut flags = if self.trusted {
            ToolFlags::from_annotations(server, annotations)
        } else {
            ToolFlags::untrusted(server)
        };
        if let Some(user) = self.overrides.get(tool) {
            flags.apply(user);
        }
        flags
    }
}

/// Flags a user sets for one tool, whatever the server says; `None` leaves a flag to the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Override {
    /// Early: its calls may start before the response ends ([`headstart::ToolSpec::early`]).
    pub early: Option<bool>,
    /// Safe to run twice.
    pub idempotent: Option<bool>,
    /// `Some(None)` removes the conflict key, `Some(Some(key))` sets one.
    pub conflict_key: Option<Option<String>>,
    /// Fences its batch.
    pub sequential: Option<bool>,
}

impl Override {
    /// Sets `early`.
    pub fn early(mut self, value: bool) -> Self {
        self.early = Some(value);
        self
    }

    /// The name [`Override::early`] had before issue 20.
    #[deprecated(note = "renamed to `Override::early`")]
    pub fn is_async(self, value: bool) -> Self {
        self.early(value)
    }

    /// Sets `idempotent`.
    pub fn idempotent(mut self, value: bool) -> Self {
        self.idempotent = Some(value);
        self
    }

    /// Sets (or, with `None`, removes) the conflict key.
    pub fn conflict_key(mut self, key: Option<String>) -> Self {
        self.conflict_key = Some(key);
        self
    }

    /// Sets `sequential`.
    pub fn sequential(mut self, value: bool) -> Self {
        self.sequential = Some(value);
        self
    }
}

/// The flags headstart applies to one MCP tool, each with the reason it has its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolFlags {
    /// Early ([`headstart::ToolSpec::early`]); `async` when serialized, the wire's word.
    #[serde(rename = "async")]
    pub early: bool,
    /// Safe to run twice ([`headstart::ToolSpec::idempotent`]).
    pub idempotent: bool,
    /// Every call's conflict key ([`headstart::Tool::conflict_key`]).
    pub conflict_key: Option<String>,
    /// Fences its batch ([`headstart::ToolSpec::execution_mode`]).
    pub sequential: bool,
    /// Why each flag has its value, by flag name (`async`, `idempotent`, `conflict_key`, `sequential`).
    pub reasons: BTreeMap<&'static str, String>,
}

/// The conflict key shared by the writes to one server.
pub fn server_conflict_key(server: &str) -> String {
    format!("mcp:{server}")
}

impl ToolFlags {
    fn untrusted(server: &str) -> Self {
        let why = "server not trusted: annotations ignored";
        ToolFlags {
            early: false,
            idempotent: false,
            conflict_key: Some(server_conflict_key(server)),
            sequential: false,
            reasons: BTreeMap::from([
                ("async", format!("{why}; sync, runs after the response ends")),
                ("idempotent", format!("{why}; not re-run by recovery")),
                (
                    "conflict_key",
                    format!("{why}; treated as a write, so calls to this server keep source order"),
                ),
                (
                    "sequential",
                    "MCP has no hint for it; set it with an override".to_owned(),
                ),
            ]),
        }
    }

    fn from_annotations(server: &str, annotations: Option<&ToolAnnotations>) -> Self {
        let read_only = annotations.and_then(|a| a.read_only_hint).unwrap_or(false);
        let idempotent_hint = annotations.and_then(|a| a.idempotent_hint).unwrap_or(false);
        let (early, early_why) = if read_only {
            (true, "trusted server: readOnlyHint, so it may start early")
        } else {
            (
                false,
                "trusted server: not read-only (readOnlyHint absent or false), so it waits for the response end",
            )
        };
        let (idempotent, idempotent_why) = match (read_only, idempotent_hint) {
            (true, _) => (
                true,
                "trusted server: readOnlyHint, so running it twice changes nothing",
            ),
            (false, true) => (true, "trusted server: idempotentHint"),
            (false, false) => (false, "trusted server: neither readOnlyHint nor idempotentHint"),
        };
        let (conflict_key, key_why) = if read_only {
            (None, "trusted server: readOnlyHint, so its calls conflict with nothing")
        } else {
            (
                Some(server_conflict_key(server)),
                "trusted server: not read-only, so writes to this server keep source order",
            )
        };
        ToolFlags {
            early,
            idempotent,
            conflict_key,
            sequential: false,
            reasons: BTreeMap::from([
                ("async", early_why.to_owned()),
                ("idempotent", idempotent_why.to_owned()),
                ("conflict_key", key_why.to_owned()),
                (
                    "sequential",
                    "MCP has no hint for it; set it with an override".to_owned(),
                ),
            ]),
        }
    }

    fn apply(&mut self, user: &Override) {
        let why = || "set by the user's override".to_owned();
        if let Some(value) = user.early {
            self.early = value;
            self.reasons.insert("async", why());
        }
        if let Some(value) = user.idempotent {
            self.idempotent = value;
            self.reasons.insert("idempotent", why());
        }
        if let Some(value) = &user.conflict_key {
            self.conflict_key = value.clone();
            self.reasons.insert("conflict_key", why());
        }
        if let Some(value) = user.sequential {
            self.sequential = value;
            self.reasons.insert("sequential", why());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_only() -> ToolAnnotations {
        ToolAnnotations::new().read_only(true)
    }

    #[test]
    fn untrusted_ignores_annotations() {
        let flags = ToolPolicy::untrusted().flags("s", "t", Some(&read_only().idempotent(true)));
        assert!(!flags.early);
        assert!(!flags.idempotent);
        assert_eq!(flags.conflict_key.as_deref(), Some("mcp:s"));
        assert!(flags.reasons["async"].contains("not trusted"));
    }

    #[test]
    fn trusted_read_only_is_early_idempotent_and_keyless() {
        let flags = ToolPolicy::trusted().flags("s", "t", Some(&read_only()));
        assert!(flags.early);
        assert!(flags.idempotent);
        assert_eq!(flags.conflict_key, None);
        assert!(!flags.sequential);
    }

    #[test]
    fn trusted_writer_keeps_order_and_idempotent_hint_counts() {
        let writer = ToolAnnotations::new().read_only(false).idempotent(true);
        let flags = ToolPolicy::trusted().flags("s", "t", Some(&writer));
        assert!(!flags.early);
        assert!(flags.idempotent);
        assert_eq!(flags.conflict_key.as_deref(), Some("mcp:s"));
        let bare = ToolPolicy::trusted().flags("s", "t", None);
        assert!(!bare.early && !bare.idempotent);
        assert_eq!(bare.conflict_key.as_deref(), Some("mcp:s"));
    }

    #[test]
    fn overrides_beat_the_policy_and_say_so() {
        let policy = ToolPolicy::untrusted()
            .with_override("t", Override::default().early(true).conflict_key(None).sequential(true));
        let flags = policy.flags("s", "t", None);
        assert!(flags.early && flags.sequential);
        assert_eq!(flags.conflict_key, None);
        assert_eq!(flags.reasons["async"], "set by the user's override");
        assert!(
            !flags.idempotent,
            "a flag the override leaves alone keeps the policy's value"
        );
        assert!(!policy.flags("s", "other", None).early);
    }
}
