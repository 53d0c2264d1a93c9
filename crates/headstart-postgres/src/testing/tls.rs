//! Throwaway clusters for the TLS tests. Each listens on 127.0.0.1 (a free port) and accepts TCP connections only
//! over TLS (`pg_hba.conf`: `hostssl … scram-sha-256`, `hostnossl … reject`), with a certificate for `localhost`
//! only: signed by a certificate authority the harness makes (rcgen; [`cluster`]), made with `openssl` as the
//! PostgreSQL documentation makes a self-signed one ([`docs_self_signed_cluster`]), or chained to the root through
//! an intermediate authority ([`intermediate_ca_cluster`]). Tests connect as [`USER`] with a password;
//! the harness itself uses the superuser over the cluster's Unix socket. One cluster of each kind per test process,
//! started on first use and stopped, its folder deleted, when the process ends however it ends (the guardian of
//! `cluster.rs`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tokio::sync::OnceCell;
use tokio_postgres::config::Host;

use super::address::{encode, quote_ident, Address};
use super::cluster::{launch, SUPERUSER};
use super::{connect, unavailable};
use crate::errors::describe;

/// The role the tests connect as (with [`TlsCluster::password`]).
pub const USER: &str = "headstart_tls";

/// The only name the server's certificate is valid for.
pub const CERTIFIED_HOST: &str = "localhost";

/// The TLS-only test cluster.
#[derive(Debug)]
pub struct TlsCluster {
    port: u16,
    ca_file: PathBuf,
    foreign_ca_file: PathBuf,
    password: String,
    /// The superuser's URL, over the Unix socket.
    admin_url: String,
    _guardian: Mutex<ChildStdin>,
}

/// How the server's certificate is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Certificates {
    /// A certificate for [`CERTIFIED_HOST`] signed by a CA the harness makes (rcgen).
    SignedByCa,
    /// The PostgreSQL documentation's recipe ("Creating Certificates"): `openssl req -new -x509 -days 365 -nodes
    /// -subj "/CN=localhost"`, a self-signed certificate marked as a CA, naming its host in its common name only. It
    /// is its own trust anchor: [`TlsCluster::ca_file`] is the server's certificate itself.
    DocsSelfSigned,
    /// A certificate for [`CERTIFIED_HOST`] signed by an intermediate CA, which the root CA signed; the server
    /// sends its certificate and the intermediate, and [`TlsCluster::ca_file`] holds the root only.
    Intermediate,
}

/// The TLS-only cluster of this test process, started on first use; `None` (after saying why, or a panic under
/// `HEADSTART_REQUIRE_POSTGRES=1`) when PostgreSQL cannot be had.
pub async fn cluster() -> Option<&'static TlsCluster> {
    static CLUSTER: OnceCell<Result<TlsCluster, String>> = OnceCell::const_new();
    cluster_of(&CLUSTER, Certificates::SignedByCa).await
}

/// A second TLS-only cluster, whose certificate is made with the `openssl` command as the PostgreSQL documentation
/// makes it (`Certificates::DocsSelfSigned`).
pub async fn docs_self_signed_cluster() -> Option<&'static TlsCluster> {
    static CLUSTER: OnceCell<Result<TlsCluster, String>> = OnceCell::const_new();
    cluster_of(&CLUSTER, Certificates::DocsSelfSigned).await
}

/// A third TLS-only cluster, whose certificate chains to the root through an intermediate CA
/// (`Certificates::Intermediate`).
pub async fn intermediate_ca_cluster() -> Option<&'static TlsCluster> {
    static CLUSTER: OnceCell<Result<TlsCluster, String>> = OnceCell::const_new();
    cluster_of(&CLUSTER, Certificates::Intermediate).await
}

async fn cluster_of(
    cell: &'static OnceCell<Result<TlsCluster, String>>,
    certificates: Certificates,
) -> Option<&'static TlsCluster> {
    let started = cell
        .get_or_init(|| async {
            let started = tokio::task::spawn_blocking(move || start(certificates))
                .await
                .unwrap_or_else(|err| Err(format!("starting the TLS cluster panicked: {err}")))?;
            started.create_role().await?;
            Ok(started)
        })
        .await;
    match started {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            unavailable(why);
            None
        }
    }
}

impl TlsCluster {
    /// The TCP port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PEM file of the certificate authority that signed the server's certificate.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The PEM file of another certificate authority, one that signed nothing the server shows.
    pub fn foreign_ca_file(&self) -> &Path {
        &self.foreign_ca_file
    }

    /// [`USER`]'s password (it holds `:`, `\`, `'`, `@` and a space, to exercise every escape).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A fresh database owned by [`USER`]; its name.
    pub async fn database(&self) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "headstart_tls_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let statement = format!(
            "CREATE DATABASE {} OWNER {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
            quote_ident(&name),
            quote_ident(USER)
        );
        self.admin(&statement).await.unwrap_or_else(|why| panic!("{why}"));
        name
    }

    /// A `postgresql://` URL of `dbname` as [`USER`] at `host:port`, with the password when `with_password`, and
    /// the query `params` (`sslmode=require&…`, or empty).
    pub fn url(&self, host: &str, port: u16, dbname: &str, with_password: bool, params: &str) -> String {
        let password = if with_password {
            format!(":{}", encode(self.password.as_bytes()))
        } else {
            String::new()
        };
        let query = if params.is_empty() {
            String::new()
        } else {
            format!("?{params}")
        };
        format!("postgresql://{USER}{password}@{host}:{port}/{dbname}{query}")
    }

    /// Runs `statement` as the superuser.
    async fn admin(&self, statement: &str) -> Result<(), String> {
        let client = connect(&self.admin_url)
            .await
            .map_err(|err| format!("cannot connect to the TLS test cluster: {}", describe(&err)))?;
        client
            .batch_execute(statement)
            .await
            .map_err(|err| format!("TLS test cluster: {statement}: {}", describe(&err)))
    }

    async fn create_role(&self) -> Result<(), String> {
        let password = self.password.replace('\'', "''");
        self.admin(&format!(
            "CREATE ROLE {} LOGIN PASSWORD '{password}'",
            quote_ident(USER)
        ))
        .await
    }
}

/// Starts the cluster (blocking).
fn start(certificates: Certificates) -> Result<TlsCluster, String> {
    // A free port: the kernel's pick, released just before the server takes it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|err| format!("cannot find a free port: {err}"))?
        .port();
    let files = Mutex::new(None);
    let configure = |base: &Path, data: &Path, owner: Option<(u32, u32)>| {
        let written = write_files(base, data, owner, certificates)?;
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file='{}' -c ssl_key_file='{}'",
            written.cert.display(),
            written.key.display()
        );
        *files.lock().map_err(|_| "poisoned".to_owned())? = Some(written);
        Ok(options)
    };
    let cluster = launch("headstart-pg-tls", port, Some(&configure))?;
    let files = files
        .into_inner()
        .ok()
        .flatten()
        .ok_or_else(|| "the TLS files were not written".to_owned())?;
    let admin = Address {
        host: Host::Unix(cluster.sockets.clone()),
        port,
        user: SUPERUSER.to_owned(),
        password: None,
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    Ok(TlsCluster {
        port,
        ca_file: files.ca,
        foreign_ca_file: files.foreign_ca,
        password: format!("pa:ss w@rd'\\{nanos:x}"),
        admin_url: admin.url("postgres"),
        _guardian: Mutex::new(cluster.guardian),
    })
}

/// What [`write_files`] wrote.
struct Files {
    ca: PathBuf,
    foreign_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// Writes the certificates, the server's key and `pg_hba.conf`.
fn write_files(
    base: &Path,
    data: &Path,
    owner: Option<(u32, u32)>,
    certificates: Certificates,
) -> Result<Files, String> {
    let failed = |err: rcgen::Error| format!("cannot make the test certificates: {err}");
    let foreign = authority("headstart foreign CA").map_err(failed)?;
    let dir = base.join("tls");
    fs::create_dir(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let mut files = Files {
        ca: dir.join("ca.pem"),
        foreign_ca: dir.join("foreign-ca.pem"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    };
    let write = |path: &Path, contents: &str| {
        fs::write(path, contents).map_err(|err| format!("cannot write {}: {err}", path.display()))
    };
    write(&files.foreign_ca, &foreign.pem())?;
    match certificates {
        Certificates::SignedByCa | Certificates::Intermediate => {
            let ca = authority("headstart test CA").map_err(failed)?;
            let key = KeyPair::generate().map_err(failed)?;
            let mut params = CertificateParams::new(vec![CERTIFIED_HOST.to_owned()]).map_err(failed)?;
            params.distinguished_name.push(DnType::CommonName, CERTIFIED_HOST);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let chain = if certificates == Certificates::Intermediate {
                let intermediate = CertifiedIssuer::signed_by(
                    ca_params("headstart intermediate CA").map_err(failed)?,
                    KeyPair::generate().map_err(failed)?,
                    &ca,
                )
                .map_err(failed)?;
                let cert = params.signed_by(&key, &intermediate).map_err(failed)?;
                format!("{}{}", cert.pem(), intermediate.pem())
            } else {
                params.signed_by(&key, &ca).map_err(failed)?.pem()
            };
            write(&files.ca, &ca.pem())?;
            write(&files.cert, &chain)?;
            write(&files.key, &key.serialize_pem())?;
        }
        Certificates::DocsSelfSigned => {
            let made = std::process::Command::new("openssl")
                .args(["req", "-new", "-x509", "-days", "365", "-nodes", "-text", "-out"])
                .arg(&files.cert)
                .arg("-keyout")
                .arg(&files.key)
                .args(["-subj", &format!("/CN={CERTIFIED_HOST}")])
                .output()
                .map_err(|err| format!("cannot run openssl: {err}"))?;
            if !made.status.success() {
                return Err(format!(
                    "openssl req failed: {}",
                    String::from_utf8_lossy(&made.stderr).trim()
                ));
            }
            // The server's certificate is its own root.
            files.ca = files.cert.clone();
        }
    }
    // The server refuses a key others can read, and must own it.
    fs::set_permissions(&files.key, fs::Permissions::from_mode(0o600))
        .map_err(|err| format!("cannot chmod {}: {err}", files.key.display()))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&files.key, Some(uid), Some(gid))
            .map_err(|err| format!("cannot give {} to {SUPERUSER}: {err}", files.key.display()))?;
    }
    // initdb's file, rewritten: TCP only over TLS, with a password; the superuser on the socket only.
    write(
        &data.join("pg_hba.conf"),
        "local all all trust\n\
         hostssl all all 127.0.0.1/32 scram-sha-256\n\
         hostnossl all all 127.0.0.1/32 reject\n",
    )?;
    Ok(files)
}

/// A self-signed certificate authority.
fn authority(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    CertifiedIssuer::self_signed(ca_params(name)?, KeyPair::generate()?)
}

/// A certificate authority's parameters: it signs certificates and revocation lists.
fn ca_params(name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}
