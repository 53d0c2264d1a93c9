//! TLS for the store's connections: rustls with the ring provider (the same as the HTTP client's; no aws-lc),
//! wired into tokio-postgres as a [`MakeTlsConnect`], and the certificate checks of each `sslmode`.
//!
//! | sslmode | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | never | – |
//! | `allow` | only when the server refuses plain text | – |
//! | `prefer` (default) | when the server offers TLS; plain text when the handshake fails | the chain, when root certificates are configured |
//! | `require` | always | the chain, when root certificates are configured (libpq: then it is `verify-ca`) |
//! | `verify-ca` | always | the chain |
//! | `verify-full` | always | the chain and the host name |
//!
//! Root certificates are `sslrootcert` (a PEM file, or `system` for the platform's store, read by
//! rustls-native-certs from the usual files, offline), else `~/.postgresql/root.crt` when it exists. The checks
//! themselves, as libpq makes them, are in [`crate::certificate`].

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use crate::certificate::{handshake_failure, LibpqVerifier, Roots};
use crate::conninfo::{RootCerts, SslMode, TlsSettings};

/// Makes a TLS connector per host for tokio-postgres (and deadpool-postgres): rustls, one client configuration.
#[derive(Clone)]
pub(crate) struct MakeRustls {
    config: Arc<ClientConfig>,
    /// The `sslmode` it was made for: how a connection falls back ([`crate::connect`]).
    mode: SslMode,
}

impl MakeRustls {
    /// The `sslmode` it was made for.
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }
}

/// The connector for `settings`; `home` locates libpq's default root certificates (`~/.postgresql/root.crt`).
pub(crate) fn connector(settings: &TlsSettings, home: Option<&Path>) -> Result<MakeRustls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match settings.mode {
        // libpq's `allow` checks no certificate: TLS only as a fallback, for encryption.
        SslMode::Disable | SslMode::Allow => None,
        mode => {
            let roots = roots(settings.root.as_ref(), home)?;
            if roots.is_none() && matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) {
                let mode = if mode == SslMode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                };
                return Err(format!(
                    "sslmode={mode} needs the certificate authority's certificate: set sslrootcert to its PEM file \
                     (for a self-signed server certificate, the certificate itself), or to `system` for the \
                     platform's trusted roots (there is no ~/.postgresql/root.crt)"
                ));
            }
            roots
        }
    };
    let host_name = settings.mode == SslMode::VerifyFull;
    let verifier = LibpqVerifier::new(roots, host_name, Arc::clone(&provider))?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("cannot configure TLS: {err}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // The protocol name PostgreSQL 17 requires with direct TLS negotiation; older servers ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(MakeRustls {
        config: Arc::new(config),
        mode: settings.mode,
    })
}

/// The root certificates: `sslrootcert`, else `~/.postgresql/root.crt` if it exists, else none.
fn roots(root: Option<&RootCerts>, home: Option<&Path>) -> Result<Option<Roots>, String> {
    let mut store = RootCertStore::empty();
    let (given, source) = match root {
        Some(RootCerts::System) => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                return Err(format!(
                    "sslrootcert=system: no trusted root certificates found on this system ({})",
                    errors.join("; ")
                ));
            }
            (Vec::new(), "the system's trusted roots".to_owned())
        }
        Some(RootCerts::File(path)) => (add_pem(&mut store, path)?, format!("sslrootcert {}", path.display())),
        None => {
            let Some(default) = home.map(|home| home.join(".postgresql").join("root.crt")) else {
                return Ok(None);
            };
            if !default.is_file() {
                return Ok(None);
            }
            (
                add_pem(&mut store, &default)?,
                format!("{} (the default sslrootcert)", default.display()),
            )
        }
    };
    Ok(Some(Roots { store, given, source }))
}

/// Adds every certificate of the PEM file at `path`; returns them.
fn add_pem(store: &mut RootCertStore, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|err| format!("cannot read sslrootcert {shown}: {err}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("sslrootcert {shown} is not a valid PEM file: {err}"))?;
    if certs.is_empty() {
        return Err(format!("sslrootcert {shown} holds no certificate"));
    }
    for cert in &certs {
        store
            .add(cert.clone())
            .map_err(|err| format!("sslrootcert {shown} holds an invalid certificate: {err}"))?;
    }
    Ok(certs)
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, TlsError> {
        // tokio-postgres asks for a connector before it knows whether TLS will be used (over a Unix socket, with
        // no name): a name TLS cannot check fails the handshake only, if there is one.
        let name = ServerName::try_from(domain.to_owned())
            .map_err(|err| TlsError(format!("`{domain}` is not a host name TLS can check: {err}")));
        Ok(RustlsConnect {
            config: Arc::clone(&self.config),
            name,
        })
    }
}

/// The TLS handshake with one host.
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: Result<ServerName<'static>, TlsError>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name?, stream)
                .await
                .map_err(|err| TlsError(handshake_failure(&err)))?;
            Ok(RustlsStream(stream))
        })
    }
}

/// A failed TLS handshake (a refused certificate, a protocol error), in words. Its own type, not the
/// `io::Error` rustls reports it as, so that it reads as a refusal to connect, not as a lost connection worth
/// retrying (`errors::connection_lost`).
#[derive(Debug)]
pub(crate) struct TlsError(String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// A TLS connection to the server.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// No channel binding (SCRAM-SHA-256-PLUS): tokio-postgres then authenticates with plain SCRAM-SHA-256
    /// (`channel_binding=prefer`, its default).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
