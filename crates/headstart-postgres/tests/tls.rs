//! The store against a PostgreSQL that accepts TCP connections only over TLS, with passwords
//! (`headstart_postgres::testing::tls`): every `sslmode`, refused certificates, passwords from the environment
//! and the password file, `key=value` strings, and a proxy that checks nothing crosses in plain text.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use headstart_core::model::UserMessage;
use headstart_postgres::testing::tls::{self, TlsCluster, CERTIFIED_HOST, USER};
use headstart_postgres::{PgEnvironment, PgOptions, PgStore};
use headstart_store::{SessionQueue, StoreError, TranscriptStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Options that ignore the process's environment (a developer's `PGSSLMODE` or `~/.pgpass` must not change a
/// test), with `environment`'s variables instead.
fn options(environment: PgEnvironment) -> PgOptions {
    PgOptions {
        environment: Some(environment),
        ..PgOptions::default()
    }
}

/// A URL parameter's value, percent-encoded.
fn encoded(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// `sslmode=MODE` with the cluster's CA as `sslrootcert`.
fn with_root(cluster: &TlsCluster, mode: &str) -> String {
    format!(
        "sslmode={mode}&sslrootcert={}",
        encoded(&cluster.ca_file().display().to_string())
    )
}

/// `sslmode=verify-full` with the cluster's CA.
fn verify_full(cluster: &TlsCluster) -> String {
    with_root(cluster, "verify-full")
}

/// Connects to a fresh database of `cluster` at `host` with `params`, and checks the store works.
async fn connects_and_works(cluster: &TlsCluster, host: &str, params: &str) {
    let database = cluster.database().await;
    let url = cluster.url(host, cluster.port(), &database, true, params);
    let store = PgStore::connect(&url, options(PgEnvironment::default()))
        .await
        .unwrap_or_else(|err| panic!("{params}: {err}"));
    works(&store).await;
}

/// The basics of a working store: a session created, one submitted and claimed, both listed.
async fn works(store: &PgStore) {
    let session = store.create_session(1).await.expect("create a session");
    let submitted = store
        .submit(&UserMessage::new("over TLS"), 2)
        .await
        .expect("submit a session");
    let claims = store
        .claim("tls-worker", std::time::Duration::from_secs(30), 4)
        .await
        .expect("claim");
    assert_eq!(
        claims.iter().map(|claim| &claim.lease.session).collect::<Vec<_>>(),
        vec![&submitted]
    );
    let sessions = store.sessions().await.expect("list sessions");
    assert!(sessions.iter().any(|info| info.id == session), "{sessions:?}");
    assert_eq!(sessions.len(), 2, "{sessions:?}");
}

async fn refused(url: &str, environment: PgEnvironment) -> String {
    let err = PgStore::connect(url, options(environment))
        .await
        .expect_err("the connection must be refused");
    assert!(
        matches!(err, StoreError::Open { .. }),
        "a refusal, not a retryable failure: {err:?}"
    );
    let message = err.to_string();
    eprintln!("refused as expected: {message}");
    message
}

#[tokio::test]
async fn require_verify_ca_and_verify_full_connect_and_work() {
    let Some(cluster) = tls::cluster().await else { return };
    for (host, params) in [
        (CERTIFIED_HOST, "sslmode=require".to_owned()),
        (CERTIFIED_HOST, verify_full(cluster)),
        // verify-ca checks the chain, not the name: an address the certificate does not name is fine.
        ("127.0.0.1", with_root(cluster, "verify-ca")),
    ] {
        connects_and_works(cluster, host, &params).await;
    }
}

#[tokio::test]
async fn verify_full_refuses_a_wrong_host_name_and_an_unknown_authority() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    // The certificate names `localhost` only.
    let url = cluster.url("127.0.0.1", cluster.port(), &database, true, &verify_full(cluster));
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(message.contains("TLS handshake"), "{message}");
    assert!(message.contains("not valid for the host name 127.0.0.1"), "{message}");
    assert!(message.contains("sslmode=verify-ca"), "{message}");

    let foreign = encoded(&cluster.foreign_ca_file().display().to_string());
    let params = format!("sslmode=verify-full&sslrootcert={foreign}");
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, &params);
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(
        message.contains("not signed by a certificate of sslrootcert"),
        "{message}"
    );
    assert!(
        !message.contains("UnknownIssuer") && !message.contains("Other("),
        "words, not an enum: {message}"
    );
    // Under `require` the same foreign root is checked too (libpq: a root certificate makes it verify-ca).
    let params = format!("sslmode=require&sslrootcert={foreign}");
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, &params);
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(
        message.contains("not signed by a certificate of sslrootcert"),
        "{message}"
    );
    assert!(!message.contains(cluster.password()), "{message}");
}

#[tokio::test]
async fn verify_full_without_a_root_certificate_says_how_to_give_one() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, "sslmode=verify-full");
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(message.contains("sslrootcert"), "{message}");
}

#[tokio::test]
async fn plain_text_is_refused_by_the_server() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, "sslmode=disable");
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(
        message.contains("no encryption"),
        "the server's pg_hba refusal: {message}"
    );
}

#[tokio::test]
async fn a_wrong_password_is_refused_without_showing_it() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let port = cluster.port();
    let url = format!("postgresql://{USER}:wr0ng-s3cret@{CERTIFIED_HOST}:{port}/{database}?sslmode=require");
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(message.contains("password authentication failed"), "{message}");
    assert!(!message.contains("wr0ng-s3cret"), "{message}");
    assert!(
        message.contains(&format!(
            "postgresql://{USER}:***@{CERTIFIED_HOST}:{port}/{database}?sslmode=require"
        )),
        "the redacted URL names the database: {message}"
    );

    let conn = format!("host={CERTIFIED_HOST} port={port} dbname={database} user={USER} password='wr0ng s3cret'");
    let message = refused(&conn, PgEnvironment::default()).await;
    assert!(message.contains("password authentication failed"), "{message}");
    assert!(!message.contains("wr0ng") && !message.contains("s3cret"), "{message}");
    assert!(message.contains("password=***"), "{message}");
}

/// A TCP proxy to `upstream` on 127.0.0.1 that records every byte both ways; its port and the record. It stops
/// with the test's runtime.
async fn recording_proxy(upstream: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
    let port = listener.local_addr().expect("the proxy's address").port();
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&recorded);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::spawn(pipe(client_read, server_write, Arc::clone(&record)));
            tokio::spawn(pipe(server_read, client_write, Arc::clone(&record)));
        }
    });
    (port, recorded)
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    record: Arc<Mutex<Vec<u8>>>,
) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        record.lock().expect("the record").extend_from_slice(&buffer[..read]);
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn by_default_a_proxy_sees_no_plain_text() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let (port, recorded) = recording_proxy(cluster.port()).await;

    // No sslmode: prefer, the default.
    let url = cluster.url("127.0.0.1", port, &database, true, "");
    let store = PgStore::connect(&url, options(PgEnvironment::default()))
        .await
        .expect("connect through the proxy");
    works(&store).await;
    drop(store);
    let bytes = recorded.lock().expect("the record").clone();
    assert!(
        bytes.len() > 1000,
        "the proxy carried the session ({} bytes)",
        bytes.len()
    );
    for plain in ["CREATE TABLE", "SELECT", "INSERT", "over TLS", USER, "headstart"] {
        assert!(!contains(&bytes, plain), "`{plain}` crossed the proxy in plain text");
    }
    eprintln!("the proxy carried {} bytes, none of them plain SQL", bytes.len());

    // The control: without TLS the same proxy reads the startup message (the server then refuses it).
    let (port, recorded) = recording_proxy(cluster.port()).await;
    let url = cluster.url("127.0.0.1", port, &database, true, "sslmode=disable");
    refused(&url, PgEnvironment::default()).await;
    let bytes = recorded.lock().expect("the record").clone();
    assert!(
        contains(&bytes, USER),
        "the control saw plain text ({} bytes)",
        bytes.len()
    );
}

#[tokio::test]
async fn pgpassword_and_the_password_file_supply_the_password() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, false, "sslmode=require");

    let message = refused(&url, PgEnvironment::default()).await;
    assert!(message.contains("password"), "no password anywhere: {message}");

    let environment = PgEnvironment {
        password: Some(cluster.password().to_owned()),
        ..PgEnvironment::default()
    };
    let store = PgStore::connect(&url, options(environment))
        .await
        .expect("PGPASSWORD supplies the password");
    works(&store).await;

    // A password file: a line that does not match first, then the right one with `:` and `\` escaped.
    let dir = std::env::temp_dir().join(format!("headstart-pgpass-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder for the password file");
    let passfile = dir.join("pgpass");
    let escaped = cluster.password().replace('\\', "\\\\").replace(':', "\\:");
    let port = cluster.port();
    std::fs::write(
        &passfile,
        format!("# test\n{CERTIFIED_HOST}:{port}:other_db:{USER}:wrong\n{CERTIFIED_HOST}:{port}:*:{USER}:{escaped}\n"),
    )
    .expect("write the password file");
    let environment = PgEnvironment {
        passfile: Some(passfile.clone()),
        ..PgEnvironment::default()
    };
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).expect("chmod 0644");
    let message = refused(&url, environment.clone()).await;
    assert!(
        message.contains("chmod 0600"),
        "a readable password file is ignored, and said so: {message}"
    );

    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).expect("chmod 0600");
    let database = cluster.database().await;
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, false, "sslmode=require");
    let store = PgStore::connect(&url, options(environment))
        .await
        .expect("the password file supplies the password");
    works(&store).await;

    // `passfile=` in the string names it too.
    let database = cluster.database().await;
    let params = format!("sslmode=require&passfile={}", encoded(&passfile.display().to_string()));
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, false, &params);
    let store = PgStore::connect(&url, options(PgEnvironment::default()))
        .await
        .expect("passfile= supplies the password");
    works(&store).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `key=value` value, quoted.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[tokio::test]
async fn key_value_strings_and_upper_case_schemes_connect() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let conn = format!(
        "host={CERTIFIED_HOST} port={} dbname={database} user={USER} password={} sslmode=verify-full sslrootcert={}",
        cluster.port(),
        quoted(cluster.password()),
        quoted(&cluster.ca_file().display().to_string()),
    );
    assert!(headstart_postgres::is_connection_string(&conn));
    let store = PgStore::connect(&conn, options(PgEnvironment::default()))
        .await
        .expect("a key=value string connects");
    works(&store).await;
    assert!(!store.label().contains(cluster.password()), "{}", store.label());
    assert!(store.label().contains("password=***"), "{}", store.label());

    let database = cluster.database().await;
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, &verify_full(cluster));
    let upper = url.replacen("postgresql://", "POSTGRESQL://", 1);
    let store = PgStore::connect(&upper, options(PgEnvironment::default()))
        .await
        .expect("an upper-case scheme connects");
    works(&store).await;
    assert!(
        store.label().starts_with(&format!("POSTGRESQL://{USER}:***@")),
        "{}",
        store.label()
    );
}

/// The PostgreSQL documentation's own recipe ("Creating Certificates"), made with `openssl`: a self-signed server
/// certificate, marked as a CA, naming `localhost` in its common name only, and given as its own `sslrootcert`, as
/// `psql "…?sslmode=verify-full&sslrootcert=server.crt"` accepts it.
#[tokio::test]
async fn the_documentations_self_signed_certificate_is_accepted_as_libpq_accepts_it() {
    let Some(cluster) = tls::docs_self_signed_cluster().await else {
        return;
    };
    for mode in ["verify-full", "verify-ca", "require"] {
        connects_and_works(cluster, CERTIFIED_HOST, &with_root(cluster, mode)).await;
    }
    let database = cluster.database().await;
    // The host name is still checked under verify-full: the common name is localhost, not 127.0.0.1.
    let url = cluster.url("127.0.0.1", cluster.port(), &database, true, &verify_full(cluster));
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(message.contains("not valid for the host name 127.0.0.1"), "{message}");
    // verify-ca checks no name.
    connects_and_works(cluster, "127.0.0.1", &with_root(cluster, "verify-ca")).await;
    // Another root is still refused, in words.
    let foreign = encoded(&cluster.foreign_ca_file().display().to_string());
    let url = cluster.url(
        CERTIFIED_HOST,
        cluster.port(),
        &database,
        true,
        &format!("sslmode=verify-full&sslrootcert={foreign}"),
    );
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(
        message.contains("certificate authority's certificate as its own"),
        "{message}"
    );
    assert!(!message.contains("CaUsedAsEndEntity"), "words, not an enum: {message}");
}

/// libpq's two second attempts: `allow` asks again over TLS when the server refuses plain text (this one accepts
/// TCP over TLS only), and `prefer` tries plain text when the TLS handshake fails (here: the certificate refused
/// against another root), which this server then refuses as unencrypted.
#[tokio::test]
async fn allow_and_prefer_try_a_second_way_as_libpq_does() {
    let Some(cluster) = tls::cluster().await else { return };
    // allow: plain text refused, then TLS.
    connects_and_works(cluster, CERTIFIED_HOST, "sslmode=allow").await;
    let database = cluster.database().await;

    let foreign = encoded(&cluster.foreign_ca_file().display().to_string());
    let params = format!("sslmode=prefer&sslrootcert={foreign}");
    let url = cluster.url(CERTIFIED_HOST, cluster.port(), &database, true, &params);
    let message = refused(&url, PgEnvironment::default()).await;
    assert!(
        message.contains("no encryption"),
        "the plain-text attempt was made: {message}"
    );
    // Without the fallback the handshake's refusal would be the error.
    assert!(!message.contains("not signed"), "{message}");
    assert!(!message.contains(cluster.password()), "{message}");
}

/// A chain through an intermediate CA, the server sending its certificate and the intermediate, `sslrootcert` the
/// root only: accepted under verify-full and verify-ca, as libpq accepts it.
#[tokio::test]
async fn a_chain_through_an_intermediate_authority_is_accepted() {
    let Some(cluster) = tls::intermediate_ca_cluster().await else {
        return;
    };
    for mode in ["verify-full", "verify-ca"] {
        connects_and_works(cluster, CERTIFIED_HOST, &with_root(cluster, mode)).await;
    }
}
