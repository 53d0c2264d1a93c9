//! Where a test server listens, as a `postgresql://` URL, and quoting for the SQL the harness writes.

use tokio_postgres::config::Host;

/// Where a server listens and as whom to connect.
pub(super) struct Address {
    pub(super) host: Host,
    pub(super) port: u16,
    pub(super) user: String,
    pub(super) password: Option<Vec<u8>>,
}

impl Address {
    /// A `postgresql://` URL of database `dbname` (a Unix socket folder goes, percent-encoded, in the host part).
    pub(super) fn url(&self, dbname: &str) -> String {
        let host = match &self.host {
            Host::Tcp(host) if host.contains(':') => format!("[{host}]"),
            Host::Tcp(host) => encode(host.as_bytes()),
            Host::Unix(dir) => encode(dir.as_os_str().as_encoded_bytes()),
        };
        let password = self
            .password
            .as_deref()
            .map_or(String::new(), |password| format!(":{}", encode(password)));
        format!(
            "postgresql://{}{password}@{host}:{}/{}",
            encode(self.user.as_bytes()),
            self.port,
            encode(dbname.as_bytes())
        )
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(super) fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A PostgreSQL identifier, quoted.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests;
