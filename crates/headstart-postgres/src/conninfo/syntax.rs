//! The syntax of connection strings: the URL schemes, libpq's keywords, and `key=value` pairs with their quoting.

/// The connection keywords libpq knows: a `key=value` string starts with one of them.
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "require_auth",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "target_session_attrs",
    "load_balance_hosts",
];

/// The length of a `postgres://` or `postgresql://` prefix (any case), if `text` has one.
pub(super) fn scheme_len(text: &str) -> Option<usize> {
    ["postgresql://", "postgres://"].into_iter().find_map(|scheme| {
        text.get(..scheme.len())
            .filter(|prefix| prefix.eq_ignore_ascii_case(scheme))
            .map(|_| scheme.len())
    })
}

/// Whether `text` is a PostgreSQL connection string: a URL with a `postgres://` or `postgresql://` scheme (any
/// case), or a `key=value` string that starts with one of libpq's keywords (`host=…`, `dbname=…`, …). Anything
/// else (a file path) is not.
pub fn is_connection_string(text: &str) -> bool {
    if scheme_len(text).is_some() {
        return true;
    }
    let (pairs, _) = pairs(text);
    pairs
        .first()
        .is_some_and(|pair| pair.value.is_some() && KEYWORDS.contains(&pair.key.as_str()))
}

/// One `key=value` of a connection string; `value` is `None` for a word without `=`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pair {
    pub(super) key: String,
    pub(super) value: Option<String>,
}

/// The pairs of a `key=value` string, read as libpq does (spaces around `=` allowed; values in single quotes
/// or bare, `\` escaping the next character), and whether the last value's quote is unterminated.
pub(super) fn pairs(text: &str) -> (Vec<Pair>, bool) {
    let mut chars = text.chars().peekable();
    let mut pairs = Vec::new();
    let skip_spaces = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_spaces(&mut chars);
        if chars.peek().is_none() {
            return (pairs, false);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|&c| !c.is_whitespace() && c != '=') {
            key.push(c);
        }
        skip_spaces(&mut chars);
        if chars.next_if_eq(&'=').is_none() {
            pairs.push(Pair { key, value: None });
            continue;
        }
        skip_spaces(&mut chars);
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => {
                        pairs.push(Pair {
                            key,
                            value: Some(value),
                        });
                        return (pairs, true);
                    }
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push(Pair {
            key,
            value: Some(value),
        });
    }
}

/// A `key=value` value, quoted when it must be.
pub(super) fn quote(value: &str) -> String {
    if !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c == '\'' || c == '\\') {
        return value.to_owned();
    }
    let mut quoted = String::from("'");
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted
}
