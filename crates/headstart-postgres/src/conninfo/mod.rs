//! Connection strings as libpq reads them: `postgresql://` URLs (any case of the scheme) and `key=value` strings,
//! the parameters tokio-postgres does not know (`sslmode=verify-ca|verify-full`, `sslrootcert`, `passfile`)
//! taken out before the rest goes to [`tokio_postgres::Config`], the environment's defaults (`PGPASSWORD`,
//! `PGSSLMODE`, `PGSSLROOTCERT`, `PGPASSFILE`), and [`redact`], the one way a connection string is shown.
//!
//! Everything here is pure: the environment comes in as a [`PgEnvironment`] value, so tests never touch the
//! process's variables.

mod redact;
mod syntax;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use percent_encoding::percent_decode_str;
use tokio_postgres::config::Host;

use self::redact::HIDDEN;
use self::syntax::{pairs, quote, scheme_len};
use crate::errors::describe;

pub use self::redact::redact;
pub use self::syntax::is_connection_string;

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
    /// Plain text first; TLS (no certificate check) only when the server refuses plain text.
    Allow,
    /// TLS when the server offers it, else plain text; the certificate is checked only against root
    /// certificates that are configured (libpq's compatibility rule). A failed handshake falls back to plain text.
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
            "allow" => SslMode::Allow,
            other => {
                return Err(format!(
                    "invalid sslmode `{other}` (expected disable, allow, prefer, require, verify-ca or verify-full)"
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
    config.ssl_mode(match mode {
        _ if local_only(&config) => tokio_postgres::config::SslMode::Disable,
        // `allow` tries plain text first (`crate::connect` retries with TLS).
        SslMode::Disable | SslMode::Allow => tokio_postgres::config::SslMode::Disable,
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

/// `true` when every host of `config` is a Unix socket, where the server never speaks TLS.
pub(crate) fn local_only(config: &tokio_postgres::Config) -> bool {
    #[cfg(unix)]
    {
        !config.get_hosts().is_empty()
            && config.get_hostaddrs().is_empty()
            && config.get_hosts().iter().all(|host| matches!(host, Host::Unix(_)))
    }
    #[cfg(not(unix))]
    {
        let _ = config;
        false
    }
}
