//! The server certificate check of each `sslmode`, as libpq (OpenSSL) makes it, and its refusals in words.
//!
//! rustls' own verifier (webpki) is stricter than libpq in two ways a self-hosted server meets at once. The
//! PostgreSQL documentation's recipe (`openssl req -new -x509 … -subj "/CN=dbhost"`) makes a self-signed server
//! certificate that is its own trust anchor, marked as a certificate authority and naming its host only in its
//! common name: webpki refuses a CA certificate as an end entity, and reads host names from the subject alternative
//! names only. OpenSSL accepts a server certificate found as is among the trusted certificates, and libpq falls back
//! to the common name when the certificate has no DNS or IP alternative name. [`LibpqVerifier`] does the same for a
//! certificate pinned in `sslrootcert`, and leaves every other chain to webpki.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

/// The trusted certificates of one connection: the roots chains are checked against, and the same certificates as
/// given (a server certificate found among them as is is trusted, as OpenSSL trusts it).
#[derive(Debug)]
pub(crate) struct Roots {
    /// The roots, for chains.
    pub(crate) store: RootCertStore,
    /// The certificates of `sslrootcert` (or `~/.postgresql/root.crt`) as given; none for the system's roots.
    pub(crate) given: Vec<CertificateDer<'static>>,
    /// Where they came from, for the refusals: `sslrootcert /path/ca.pem`, `the system's trusted roots`.
    pub(crate) source: String,
}

/// The check of the server's certificate: none (`prefer`/`require` without roots, as libpq), the chain (`verify-ca`,
/// and `require` with roots), or the chain and the host name (`verify-full`). Either way the handshake's signatures
/// are checked: the server holds the key of the certificate it shows.
#[derive(Debug)]
pub(crate) struct LibpqVerifier {
    roots: Option<Roots>,
    /// `verify-full`: webpki's verifier for chains, and the host name checked.
    full: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl LibpqVerifier {
    /// A verifier checking against `roots` (none: no check), the host name too when `host_name`.
    pub(crate) fn new(roots: Option<Roots>, host_name: bool, provider: Arc<CryptoProvider>) -> Result<Self, String> {
        let full = match (&roots, host_name) {
            (Some(roots), true) => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots.store.clone()), Arc::clone(&provider))
                    .build()
                    .map_err(|err| format!("cannot build the certificate verifier: {err}"))?,
            ),
            _ => None,
        };
        Ok(LibpqVerifier { roots, full, provider })
    }

    fn check(
        &self,
        roots: &Roots,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        if roots.given.iter().any(|given| given.as_ref() == end_entity.as_ref()) {
            return pinned(end_entity, self.full.is_some().then_some(server_name), now);
        }
        if let Some(full) = &self.full {
            return full
                .verify_server_cert(end_entity, intermediates, server_name, &[], now)
                .map(|_| ());
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &roots.store,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )
    }
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            self.check(roots, end_entity, intermediates, server_name, now)
                .map_err(|error| in_words(error, roots, server_name))?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A server certificate found as is among the trusted ones: trusted, as OpenSSL trusts it, within its validity
/// period and, under `verify-full`, for the host name as libpq matches it.
fn pinned(end_entity: &CertificateDer<'_>, host: Option<&ServerName<'_>>, now: UnixTime) -> Result<(), rustls::Error> {
    let (_, cert) = x509_parser::parse_x509_certificate(end_entity.as_ref())
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let now = i64::try_from(now.as_secs())
        .ok()
        .and_then(|secs| ASN1Time::from_timestamp(secs).ok())
        .ok_or(rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let validity = cert.validity();
    if now < validity.not_before {
        return Err(rustls::Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > validity.not_after {
        return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
    }
    let Some(host) = host else {
        return Ok(());
    };
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Ok(Some(names)) = cert.subject_alternative_name() {
        for name in &names.value.general_names {
            match name {
                GeneralName::DNSName(name) => dns.push((*name).to_owned()),
                GeneralName::IPAddress(bytes) => ips.push(bytes.to_vec()),
                _ => {}
            }
        }
    }
    // libpq reads the common name only when the certificate has no DNS or IP alternative name.
    if dns.is_empty() && ips.is_empty() {
        dns.extend(
            cert.subject()
                .iter_common_name()
                .filter_map(|name| name.as_str().ok())
                .map(str::to_owned),
        );
    }
    let matches = match host {
        ServerName::DnsName(name) => dns.iter().any(|pattern| host_matches(pattern, name.as_ref())),
        ServerName::IpAddress(ip) => {
            let ip = IpAddr::from(*ip);
            let octets = match ip {
                IpAddr::V4(v4) => v4.octets().to_vec(),
                IpAddr::V6(v6) => v6.octets().to_vec(),
            };
            ips.contains(&octets) || dns.iter().any(|name| name == &ip.to_string())
        }
        _ => false,
    };
    if matches {
        Ok(())
    } else {
        Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
    }
}

/// libpq's host name match: ASCII case-insensitive, and a `*.` prefix standing for exactly one leftmost label.
pub(crate) fn host_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(label, domain)| !label.is_empty() && domain == rest),
        None => pattern == host,
    }
}

/// A failed handshake in words: a certificate [`LibpqVerifier`] refused as its refusal says it (rustls would show it
/// debug-formatted), anything else as rustls says it.
pub(crate) fn handshake_failure(error: &std::io::Error) -> String {
    let refusal = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|error| match error {
            rustls::Error::InvalidCertificate(CertificateError::Other(other)) => other.0.downcast_ref::<Refusal>(),
            _ => None,
        });
    match refusal {
        Some(refusal) => refusal.0.clone(),
        None => error.to_string(),
    }
}

/// A refused certificate, in words: what failed and which `sslmode` or `sslrootcert` would fix it.
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// `error` as a refusal in words (other errors unchanged).
fn in_words(error: rustls::Error, roots: &Roots, host: &ServerName<'_>) -> rustls::Error {
    let rustls::Error::InvalidCertificate(problem) = &error else {
        return error;
    };
    let source = &roots.source;
    let host = host.to_str();
    let words = match problem {
        CertificateError::UnknownIssuer => format!(
            "the server's certificate is not signed by a certificate of {source}: give the certificate authority \
             that signed it as sslrootcert (for a self-signed server certificate, the certificate itself)"
        ),
        CertificateError::Other(other)
            if matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            format!(
                "the server shows a certificate authority's certificate as its own, and it is not in {source}: \
                 give that certificate as sslrootcert"
            )
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
            "the server's certificate is not valid for the host name {host} (sslmode=verify-full checks it): \
             connect by a name the certificate holds, or use sslmode=verify-ca to check the chain only"
        ),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired: the server needs a new one".to_owned()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (is this machine's clock right?)".to_owned()
        }
        CertificateError::BadSignature | CertificateError::UnsupportedSignatureAlgorithmContext { .. } => {
            format!("the server's certificate chain has a signature that does not verify against {source}")
        }
        CertificateError::BadEncoding => "the server's certificate cannot be read (bad encoding)".to_owned(),
        CertificateError::Revoked => "the server's certificate was revoked".to_owned(),
        _ => format!("the server's certificate was refused against {source}"),
    };
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(Refusal(words)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_match_as_libpq_matches_them() {
        assert!(host_matches("localhost", "LOCALHOST"));
        assert!(host_matches("*.example.com", "db.example.com"));
        assert!(!host_matches("*.example.com", "a.db.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("db.example.com", "db.example.org"));
    }
}
