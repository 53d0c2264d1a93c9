//! One connection, made as libpq makes it for each `sslmode`, for the pool and the wake-up listener alike.
//!
//! tokio-postgres tries one way per connection. libpq tries a second where the mode allows one: under `prefer` a
//! TLS handshake that fails (a certificate refused against the configured roots, a server whose TLS is broken)
//! is followed by a plain-text attempt; under `allow` a server that refuses plain text is asked again over TLS.

use deadpool_postgres::Connect;
use std::future::Future;
use std::pin::Pin;

use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Error, Socket};

use crate::conninfo::{local_only, SslMode};
use crate::tls::{MakeRustls, TlsError};

/// The stream of a connection, TLS or not.
pub(crate) type Stream = <MakeRustls as MakeTlsConnect<Socket>>::Stream;

/// Connects as `config` says through `tls`, with libpq's second attempt of `tls`'s `sslmode`.
pub(crate) async fn connect(config: &Config, tls: &MakeRustls) -> Result<(Client, Connection<Socket, Stream>), Error> {
    let first = config.connect(tls.clone()).await;
    let Err(error) = first else {
        return first;
    };
    let retry = match tls.mode() {
        SslMode::Prefer if config.get_ssl_mode() == WireMode::Prefer && handshake_failed(&error) => WireMode::Disable,
        SslMode::Allow if error.as_db_error().is_some() && !local_only(config) => WireMode::Require,
        _ => return Err(error),
    };
    let mut again = config.clone();
    again.ssl_mode(retry);
    again.connect(tls.clone()).await
}

/// `true` when `error` is a TLS handshake that failed (not a refused connection or a server's answer).
fn handshake_failed(error: &Error) -> bool {
    std::error::Error::source(error).is_some_and(|source| source.downcast_ref::<TlsError>().is_some())
}

/// The pool's way to connect: [`connect`], its connection driven on a task of its own.
pub(crate) struct LibpqConnect(pub(crate) MakeRustls);

impl Connect for LibpqConnect {
    fn connect(
        &self,
        pg_config: &Config,
    ) -> Pin<Box<dyn Future<Output = Result<(Client, tokio::task::JoinHandle<()>), Error>> + Send + '_>> {
        let config = pg_config.clone();
        Box::pin(async move {
            let (client, connection) = connect(&config, &self.0).await?;
            // A connection that ends shows in its client's next query (the pool recycles a closed one).
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok((client, task))
        })
    }
}
