//! Connection strings as libpq reads them: `postgresql://` URLs (any case of the scheme) and `key=value` strings,
//! the parameters tokio-postgres does not know (`sslmode=verify-ca|verify-full`, `sslrootcert`, `passfile`)
//! taken out before the rest goes to [`tokio_postgres::Config`], the environment's defaults (`PGPASSWORD`,
//! `PGSSLMODE`, `PGSSLROOTCERT`, `PGPASSFILE`), and [`redact`], the one way a connection string is shown.
//!
//! Everything here is pure: the environment comes in as a [`PgEnvironment`] value, so tests never touch the
//! process's variables.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use percent_encoding::percent_decode_str;
use tokio_postgres::config::Host;

use crate::errors::describe;

/// What a redacted password reads as.
const HIDDEN: &str = "***";

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

/// The environment variables libpq reads that the store honours, and the two facts about the process it needs
/// (the home folder, for `~/.pgpass` and `~/.postgresql/root.crt`; the user name, the default `user`).
/// Connection-string parameters win over these.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PgEnvironment {
    /// `PGPASSWORD`: the password when the connection string has none.
    pub password: Option<String>,
    /// `PGPASSFILE`: the password file (default `~/.pgpass`).
    pub passfile: Option<PathBuf>,
    /// `PGSSLMODE`: the `sslmode` when the connection string has none.
    pub sslmode: Option<String>,
    /// `PGSSLROOTCERT`: the `sslrootcert` when the connection string has none.
    pub sslrootcert: Option<String>,
    /// The home folder (`HOME`).
    pub home: Option<PathBuf>,
    /// The operating-system user, the default `user` (as tokio-postgres takes it).
    pub os_user: Option<String>,
}

impl PgEnvironment {
    /// The process's environment.
    pub fn from_process() -> PgEnvironment {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        PgEnvironment {
            password: var("PGPASSWORD"),
            passfile: var("PGPASSFILE").map(PathBuf::from),
            sslmode: var("PGSSLMODE"),
            sslrootcert: var("PGSSLROOTCERT"),
            home: std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(PathBuf::from),
            os_user: whoami::username().ok(),
        }
    }
}

impl fmt::Debug for PgEnvironment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgEnvironment")
            .field("password", &self.password.as_ref().map(|_| HIDDEN))
            .field("passfile", &self.passfile)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("home", &self.home)
            .field("os_user", &self.os_user)
            .finish()
    }
}

/// `sslmode`, with libpq's meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it, else plain text; the certificate is checked only against root
    /// certificates that are configured (libpq's compatibility rule).
    Prefer,
    /// TLS or nothing; the certificate is checked as under `Prefer`.
    Require,
    /// TLS, the certificate chain checked against the root certificates; the host name is not.
    VerifyCa,
    /// TLS, the chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err("sslmode=allow (plain text first) is not supported: use prefer or disable".to_owned())
            }
            other => {
                return Err(format!(
                    "invalid sslmode `{other}` (expected disable, prefer, require, verify-ca or verify-full)"
                ))
            }
        })
    }
}

/// Where the root certificates that check the server's come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCerts {
    /// A PEM file.
    File(PathBuf),
    /// The platform's trusted roots (`sslrootcert=system`).
    System,
}

/// The TLS part of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// `sslmode` (default `prefer`).
    pub mode: SslMode,
    /// `sslrootcert`; when absent, `~/.postgresql/root.crt` is used if it exists (libpq's default).
    pub root: Option<RootCerts>,
}

/// What to look a password up by in a password file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassKey {
    /// The host name, Unix socket folder or address connected to.
    pub host: String,
    pub port: u16,
    pub dbname: String,
    pub user: String,
}

/// A parsed connection string.
#[derive(Debug)]
pub(crate) struct Target {
    /// Everything tokio-postgres understands, with the password from the environment when the string had none.
    pub config: tokio_postgres::Config,
    pub tls: TlsSettings,
    /// The password file to consult when `config` has no password.
    pub passfile: Option<PathBuf>,
    /// The line of the password file that applies.
    pub pass_key: PassKey,
}

/// The parameters taken out of a connection string before tokio-postgres reads it.
#[derive(Debug, Default)]
struct Extracted {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    passfile: Option<String>,
}

impl Extracted {
    /// Takes `key`'s value if it is one of ours.
    fn take(&mut self, key: &str, value: &str) -> bool {
        let slot = match key {
            "sslmode" => &mut self.sslmode,
            "sslrootcert" => &mut self.sslrootcert,
            "passfile" => &mut self.passfile,
            _ => return false,
        };
        *slot = Some(value.to_owned());
        true
    }
}

/// The length of a `postgres://` or `postgresql://` prefix (any case), if `text` has one.
fn scheme_len(text: &str) -> Option<usize> {
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

/// `conn` (a URL or a `key=value` string) with every password replaced by `***`: the user info's password and
/// every parameter whose name contains `password` (`password`, `sslpassword`). A string that cannot be parsed is
/// redacted generously (more is hidden, never less). Every message that shows a connection string shows it
/// through this function.
pub fn redact(conn: &str) -> String {
    match scheme_len(conn) {
        Some(len) => redact_url(&conn[..len], &conn[len..]),
        None => redact_key_value(conn),
    }
}

fn is_secret(key: &str) -> bool {
    key.to_ascii_lowercase().contains("password")
}

fn redact_url(scheme: &str, rest: &str) -> String {
    // The user info ends at the last `@`: a password with an unencoded `@` is hidden whole (tokio-postgres stops
    // at the first, so its password is always inside this span).
    let mut out = scheme.to_owned();
    let after = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&redact_query(&userinfo[..colon]));
                    out.push(':');
                    out.push_str(HIDDEN);
                }
                None => out.push_str(&redact_query(userinfo)),
            }
            out.push('@');
            &rest[at + 1..]
        }
        None => rest,
    };
    out.push_str(&redact_query(after));
    out
}

/// `segment` with the values of its query's secret parameters (`?password=…&…`) hidden.
fn redact_query(segment: &str) -> String {
    let Some(question) = segment.find('?') else {
        return segment.to_owned();
    };
    let params: Vec<String> = segment[question + 1..]
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if is_secret(&percent_decode_str(key).decode_utf8_lossy()) => format!("{key}={HIDDEN}"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{}?{}", &segment[..question], params.join("&"))
}

fn redact_key_value(conn: &str) -> String {
    let (pairs, unterminated) = pairs(conn);
    let last = pairs.len().saturating_sub(1);
    pairs
        .iter()
        .enumerate()
        .map(|(index, pair)| match &pair.value {
            // A word without `=` may be a stray piece of a password: hide it.
            None => HIDDEN.to_owned(),
            Some(_) if is_secret(&pair.key) || (unterminated && index == last) => format!("{}={HIDDEN}", pair.key),
            Some(value) => format!("{}={}", pair.key, quote(value)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One `key=value` of a connection string; `value` is `None` for a word without `=`.
#[derive(Debug, PartialEq, Eq)]
struct Pair {
    key: String,
    value: Option<String>,
}

/// The pairs of a `key=value` string, read as libpq does (spaces around `=` allowed; values in single quotes
/// or bare, `\` escaping the next character), and whether the last value's quote is unterminated.
fn pairs(text: &str) -> (Vec<Pair>, bool) {
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
fn quote(value: &str) -> String {
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

/// Takes our parameters out of a URL's query (`rest` is what follows the scheme) and gives the URL back with the
/// scheme in lower case, as tokio-postgres wants it.
fn strip_url(rest: &str, extracted: &mut Extracted) -> Result<String, String> {
    // tokio-postgres ends the user info at the first `@`; the query starts at the first `?` after it.
    let from = rest.find('@').unwrap_or(0);
    let mut url = "postgresql://".to_owned();
    let Some(question) = rest[from..].find('?').map(|at| from + at) else {
        url.push_str(rest);
        return Ok(url);
    };
    url.push_str(&rest[..question]);
    let mut kept = Vec::new();
    for param in rest[question + 1..].split('&') {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let key = percent_decode_str(key)
            .decode_utf8()
            .map_err(|_| "a URL parameter's name is not UTF-8".to_owned())?;
        let value = percent_decode_str(value)
            .decode_utf8()
            .map_err(|_| format!("the URL parameter `{key}` is not UTF-8"))?;
        if !extracted.take(&key, &value) {
            kept.push(param);
        }
    }
    if !kept.is_empty() {
        url.push('?');
        url.push_str(&kept.join("&"));
    }
    Ok(url)
}

/// Takes our parameters out of a `key=value` string and gives the rest back, quoted for tokio-postgres.
fn strip_key_value(conn: &str, extracted: &mut Extracted) -> Result<String, String> {
    let (pairs, unterminated) = pairs(conn);
    let mut kept = Vec::new();
    let mut previous: Option<&str> = None;
    for pair in &pairs {
        let Some(value) = &pair.value else {
            // Never quote the word: it may be a piece of a password.
            return Err(match previous {
                Some(key) => format!("a word without \"=\" follows the value of `{key}` (quote values with spaces)"),
                None => "the connection string does not start with key=value".to_owned(),
            });
        };
        if !extracted.take(&pair.key, value) {
            kept.push(format!("{}={}", pair.key, quote(value)));
        }
        previous = Some(&pair.key);
    }
    if let (true, Some(last)) = (unterminated, pairs.last()) {
        return Err(format!("the quoted value of `{}` has no closing quote", last.key));
    }
    Ok(kept.join(" "))
}

/// Parses connection string `conn` with `env`'s defaults.
pub(crate) fn parse(conn: &str, env: &PgEnvironment) -> Result<Target, String> {
    let mut extracted = Extracted::default();
    let stripped = match scheme_len(conn) {
        Some(len) => strip_url(&conn[len..], &mut extracted)?,
        None => strip_key_value(conn, &mut extracted)?,
    };
    let mut config = tokio_postgres::Config::from_str(&stripped).map_err(|err| describe(&err))?;

    let root = extracted.sslrootcert.or_else(|| env.sslrootcert.clone());
    let mode = extracted.sslmode.or_else(|| env.sslmode.clone());
    let mode = mode.as_deref().map(SslMode::parse).transpose()?;
    let system = root.as_deref() == Some("system");
    let mode = match mode {
        // libpq: the platform's roots mean little without the host name check, so `system` implies it.
        None if system => SslMode::VerifyFull,
        Some(mode) if system && mode != SslMode::VerifyFull => {
            return Err(
                "sslrootcert=system needs sslmode=verify-full (a weaker mode would not check the host name)".to_owned(),
            )
        }
        None => SslMode::Prefer,
        Some(mode) => mode,
    };
    let root = root.map(|root| match root.as_str() {
        "system" => RootCerts::System,
        _ => RootCerts::File(PathBuf::from(root)),
    });

    // Addresses only (`hostaddr=…`): the address is also the name TLS checks (tokio-postgres needs one).
    if config.get_hosts().is_empty() {
        let addresses: Vec<String> = config.get_hostaddrs().iter().map(ToString::to_string).collect();
        for address in addresses {
            config.host(&address);
        }
    }
    // Like libpq, TLS is never tried over Unix sockets (the server refuses it there).
    #[cfg(unix)]
    let local_only = !config.get_hosts().is_empty()
        && config.get_hostaddrs().is_empty()
        && config.get_hosts().iter().all(|host| matches!(host, Host::Unix(_)));
    #[cfg(not(unix))]
    let local_only = false;
    config.ssl_mode(match mode {
        _ if local_only => tokio_postgres::config::SslMode::Disable,
        SslMode::Disable => tokio_postgres::config::SslMode::Disable,
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
    });

    if config.get_user().is_none() {
        if let Some(user) = &env.os_user {
            config.user(user);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = &env.password {
            config.password(password);
        }
    }
    let passfile = extracted
        .passfile
        .map(PathBuf::from)
        .or_else(|| env.passfile.clone())
        .or_else(|| env.home.as_ref().map(|home| home.join(".pgpass")));
    let pass_key = pass_key(&config);
    Ok(Target {
        config,
        tls: TlsSettings { mode, root },
        passfile,
        pass_key,
    })
}

/// The password file's key of the first host (one password serves every host of a multi-host string).
fn pass_key(config: &tokio_postgres::Config) -> PassKey {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_owned(),
    };
    let user = config.get_user().unwrap_or_default().to_owned();
    PassKey {
        host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        dbname: config.get_dbname().map_or_else(|| user.clone(), str::to_owned),
        user,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> PgEnvironment {
        PgEnvironment {
            os_user: Some("osuser".to_owned()),
            ..PgEnvironment::default()
        }
    }

    #[test]
    fn redaction_hides_url_passwords() {
        let cases = [
            (
                "postgresql://agent:s3cret@db:5432/agents",
                "postgresql://agent:***@db:5432/agents",
            ),
            (
                "POSTGRESQL://agent:s3cret@db/agents",
                "POSTGRESQL://agent:***@db/agents",
            ),
            ("postgres://agent@db/agents", "postgres://agent@db/agents"),
            (
                "postgres://db/agents?sslmode=require",
                "postgres://db/agents?sslmode=require",
            ),
            (
                "postgresql://agent@db/x?password=s3cret&sslmode=require",
                "postgresql://agent@db/x?password=***&sslmode=require",
            ),
            (
                "postgresql://db/x?Pass%77ord=s3cret",
                "postgresql://db/x?Pass%77ord=***",
            ),
            ("postgresql://a:p@ss@w/rd@db/x", "postgresql://a:***@db/x"),
            // An `@` in the query: more is hidden, never the password shown.
            (
                "postgresql://db/x?password=s3cret&application_name=a@b",
                "postgresql://db/x?password=***&application_name=a@b",
            ),
        ];
        for (conn, redacted) in cases {
            assert_eq!(redact(conn), redacted, "{conn}");
            assert!(!redact(conn).contains("s3cret"), "{conn}");
        }
    }

    #[test]
    fn redaction_hides_key_value_passwords() {
        let cases = [
            ("host=db user=agent password=s3cret", "host=db user=agent password=***"),
            (
                "host=db password = 's3 cr\\'et' dbname=x",
                "host=db password=*** dbname=x",
            ),
            ("sslpassword=s3cret sslmode=require", "sslpassword=*** sslmode=require"),
            ("host='my db' user=a", "host='my db' user=a"),
            // A password with an unquoted space: its second word is hidden too.
            ("host=db password=s3 cret", "host=db password=*** ***"),
            ("host='db password=s3cret", "host=***"),
            ("", ""),
        ];
        for (conn, redacted) in cases {
            assert_eq!(redact(conn), redacted, "{conn}");
            assert!(!redact(conn).contains("s3") && !redact(conn).contains("cret"), "{conn}");
        }
    }

    #[test]
    fn connection_strings_are_recognised() {
        for yes in [
            "postgres://h/db",
            "postgresql:///db?host=/tmp",
            "POSTGRESQL://u@h/db",
            "Postgres://h",
            "host=db dbname=x",
            "dbname = x",
            "user=a password='x y'",
        ] {
            assert!(is_connection_string(yes), "{yes}");
        }
        for no in [
            "runs.db",
            "postgres.db",
            "./a=b.db",
            "data/host.db",
            "postgres:/x",
            "=x",
            "",
        ] {
            assert!(!is_connection_string(no), "{no}");
        }
    }

    #[test]
    fn libpq_parameters_are_taken_out_of_urls() {
        let target = parse(
            "POSTGRESQL://agent:pw@db.internal:6543/agents?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem\
             &application_name=w&passfile=/p",
            &env(),
        )
        .expect("parses");
        assert_eq!(target.tls.mode, SslMode::VerifyFull);
        assert_eq!(target.tls.root, Some(RootCerts::File(PathBuf::from("/etc/ca.pem"))));
        assert_eq!(target.passfile, Some(PathBuf::from("/p")));
        assert_eq!(target.config.get_application_name(), Some("w"));
        assert_eq!(target.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        assert_eq!(
            target.pass_key,
            PassKey {
                host: "db.internal".to_owned(),
                port: 6543,
                dbname: "agents".to_owned(),
                user: "agent".to_owned()
            }
        );
        let target = parse("postgres://h/db?sslmode=verify-ca", &env()).expect("parses");
        assert_eq!(target.tls.mode, SslMode::VerifyCa);
        assert_eq!(target.config.get_user(), Some("osuser"), "the OS user by default");
    }

    #[test]
    fn libpq_parameters_are_taken_out_of_key_value_strings() {
        let target = parse(
            "host=db.internal port=6543 dbname=agents user=agent password='a b\\'c' sslmode=require \
             sslrootcert='/etc/my ca.pem'",
            &env(),
        )
        .expect("parses");
        assert_eq!(target.tls.mode, SslMode::Require);
        assert_eq!(target.tls.root, Some(RootCerts::File(PathBuf::from("/etc/my ca.pem"))));
        assert_eq!(target.config.get_password(), Some(&b"a b'c"[..]));
        assert_eq!(target.config.get_dbname(), Some("agents"));
        assert_eq!(target.config.get_ports(), &[6543]);
    }

    #[test]
    fn prefer_is_the_default_and_the_environment_fills_gaps() {
        let target = parse("postgresql://u@h/db", &env()).expect("parses");
        assert_eq!(
            target.tls,
            TlsSettings {
                mode: SslMode::Prefer,
                root: None
            }
        );
        assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
        assert_eq!(target.config.get_password(), None);

        let env = PgEnvironment {
            password: Some("from-env".to_owned()),
            sslmode: Some("verify-ca".to_owned()),
            sslrootcert: Some("/ca.pem".to_owned()),
            home: Some(PathBuf::from("/home/u")),
            ..env()
        };
        let target = parse("postgresql://u@h/db", &env).expect("parses");
        assert_eq!(target.config.get_password(), Some(&b"from-env"[..]));
        assert_eq!(target.tls.mode, SslMode::VerifyCa);
        assert_eq!(target.passfile, Some(PathBuf::from("/home/u/.pgpass")));
        let target = parse("postgresql://u:given@h/db?sslmode=disable", &env).expect("parses");
        assert_eq!(target.config.get_password(), Some(&b"given"[..]), "the string wins");
        assert_eq!(target.tls.mode, SslMode::Disable);
    }

    #[test]
    fn system_roots_imply_verify_full() {
        let target = parse("host=h sslrootcert=system", &env()).expect("parses");
        assert_eq!(target.tls.mode, SslMode::VerifyFull);
        assert_eq!(target.tls.root, Some(RootCerts::System));
        let err = parse("host=h sslrootcert=system sslmode=require", &env()).expect_err("weak");
        assert!(err.contains("verify-full"), "{err}");
    }

    #[test]
    fn unix_sockets_never_use_tls_and_addresses_name_the_host() {
        let target = parse("host=/run/postgresql sslmode=require", &env()).expect("parses");
        assert_eq!(target.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
        let target = parse("hostaddr=127.0.0.1 sslmode=verify-full", &env()).expect("parses");
        assert_eq!(target.config.get_hosts(), &[Host::Tcp("127.0.0.1".to_owned())]);
    }

    #[test]
    fn bad_strings_are_refused_without_echoing_secrets() {
        for (conn, expected) in [
            ("host=h password=s3 cret", "follows the value of `password`"),
            ("host=h password='s3cret", "no closing quote"),
            ("postgresql://h/db?sslmode=verify", "invalid sslmode"),
            ("postgresql://h/db?sslmode=allow", "not supported"),
            ("postgresql://u:s3cret@h:notaport/db", "port"),
            ("host=h sslcert=/c.pem password=s3cret", "sslcert"),
        ] {
            let err = parse(conn, &env()).expect_err(conn);
            assert!(err.contains(expected), "{conn}: {err}");
            assert!(!err.contains("s3") && !err.contains("cret"), "{conn}: {err}");
        }
    }
}
