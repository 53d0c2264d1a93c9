//! A real PostgreSQL for tests: [`database`] gives each test a fresh, empty database.
//!
//! The server is, in order of preference:
//! 1. the one `DATABASE_URL` points at (its role must be allowed to create databases); each test's database is
//!    dropped when the test ends;
//! 2. a throwaway cluster this test process starts once, from the PostgreSQL binaries it finds (`initdb` and
//!    `pg_ctl` on `PATH`, else the newest `/usr/lib/postgresql/<version>/bin`, else `pg_config --bindir`). It
//!    lives in a private temporary folder, listens only on a Unix socket there (no TCP port, so test processes
//!    never collide), runs with `fsync = off` (tests need speed, not crash safety), and, when the tests run as
//!    root, runs as the `postgres` user (`initdb` refuses root). A guardian process stops it and deletes the
//!    folder as soon as the test process ends, however it ends (a panic, an abort, SIGKILL): it waits for the
//!    end of a pipe that only the test process holds open.
//!
//! [`tls::cluster`] starts another kind of throwaway cluster, for the TLS tests: TCP on 127.0.0.1, TLS only,
//! passwords.
//!
//! When neither is available, [`database`] prints a loud message and returns `None`, and the calling test skips;
//! with `HEADSTART_REQUIRE_POSTGRES=1` (CI sets it) it panics instead, so a skip cannot pass unnoticed.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

use crate::errors::describe;

pub mod tls;

/// Set to `1` to make a missing PostgreSQL fail the tests instead of skipping them.
pub const REQUIRE_POSTGRES: &str = "HEADSTART_REQUIRE_POSTGRES";

/// The URL of an existing server to use instead of starting a cluster.
pub const DATABASE_URL: &str = "DATABASE_URL";

/// The superuser of a throwaway cluster.
const SUPERUSER: &str = "postgres";

/// The port a throwaway cluster's socket is named after (it listens on no TCP port).
const PORT: u16 = 5432;

/// A fresh, empty database for one test, on the test server. Dropping it drops the database on a `DATABASE_URL`
/// server; a throwaway cluster goes away whole when the test process ends.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    name: String,
    drop_with: Option<String>,
}

impl TestDatabase {
    /// A `postgresql://` URL of the database, for [`PgStore::connect`](crate::PgStore::connect) in this process
    /// or in a child process.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A plain connection to the database, to set up or inspect what a test needs beside the store (its
    /// connection task runs on the current tokio runtime).
    pub async fn client(&self) -> Client {
        connect(&self.url)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to the test database {}: {}", self.name, describe(&err)))
    }

    /// The value of `query`, a `SELECT count(*) …` (what a test checks a store did, or did not, create).
    pub async fn count(&self, query: &str) -> i64 {
        self.client()
            .await
            .query_one(query, &[])
            .await
            .and_then(|row| row.try_get(0))
            .unwrap_or_else(|err| panic!("test database {}: {query}: {}", self.name, describe(&err)))
    }

    /// Whether the database has a `headstart` schema (a read-only handle must never create it).
    pub async fn has_store_schema(&self) -> bool {
        self.count("SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'headstart'")
            .await
            > 0
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(admin_url) = self.drop_with.take() else {
            return;
        };
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(&self.name));
        // Drop runs outside any runtime (or inside one that cannot block): use a private one on its own thread.
        // Best effort: a database left behind on a developer's server is harmless.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let admin = connect(&admin_url).await.ok()?;
                admin.batch_execute(&statement).await.ok()
            })
        })
        .join();
    }
}

/// A fresh, empty database on the test server, or `None` when no PostgreSQL can be had (after saying so loudly;
/// with `HEADSTART_REQUIRE_POSTGRES=1`, it panics instead).
pub async fn database() -> Option<TestDatabase> {
    let server = match tokio::task::spawn_blocking(server).await {
        Ok(server) => server,
        Err(err) => panic!("starting the test PostgreSQL panicked: {err}"),
    };
    let server = match server {
        Ok(server) => server,
        Err(why) => {
            unavailable(why);
            return None;
        }
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "headstart_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = connect(&server.admin_url).await.unwrap_or_else(|err| {
        panic!(
            "cannot connect to the test PostgreSQL ({}): {}",
            server.describe,
            describe(&err)
        )
    });
    // template0 and the C locale: an encoding-neutral template, so UTF8 works whatever the server's default.
    let create = format!(
        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
        quote_ident(&name)
    );
    admin.batch_execute(&create).await.unwrap_or_else(|err| {
        panic!(
            "cannot create the test database {name} ({}): {}",
            server.describe,
            describe(&err)
        )
    });
    Some(TestDatabase {
        url: server.address.url(&name),
        name,
        drop_with: server.external.then(|| server.admin_url.clone()),
    })
}

/// No PostgreSQL for the tests, because of `why`: a panic under `HEADSTART_REQUIRE_POSTGRES=1`, else a loud
/// message (the caller then skips).
fn unavailable(why: &str) {
    if required() {
        panic!("{REQUIRE_POSTGRES}=1 but no PostgreSQL is available for the tests: {why}");
    }
    announce_skip(why);
}

fn required() -> bool {
    std::env::var(REQUIRE_POSTGRES).is_ok_and(|value| value == "1")
}

/// Prints why the PostgreSQL tests are skipped, once per test process, straight to the standard error (the test
/// harness captures only `eprintln!`, and a skipped test passes: the message must be seen).
fn announce_skip(why: &str) {
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    ANNOUNCED.get_or_init(|| {
        let banner = "=".repeat(100);
        let _ = writeln!(
            std::io::stderr(),
            "\n{banner}\nPOSTGRESQL TESTS SKIPPED: {why}\nInstall the PostgreSQL server (Debian: apt-get install \
             postgresql), or set {DATABASE_URL} to a server where the role may create databases; set \
             {REQUIRE_POSTGRES}=1 to make this a failure.\n{banner}"
        );
    });
}

async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The test server of this process.
struct Server {
    /// How to reach it (without a database name).
    address: Address,
    /// A URL of its maintenance database, where test databases are created.
    admin_url: String,
    /// For messages.
    describe: String,
    /// Whether it is the `DATABASE_URL` server (whose test databases are dropped after each test).
    external: bool,
    /// The throwaway cluster's guardian: it stops the cluster when this pipe closes, at the process's end.
    _guardian: Option<Mutex<ChildStdin>>,
}

/// The server, started on first use.
fn server() -> Result<&'static Server, &'static str> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var(DATABASE_URL) {
            Ok(url) if !url.trim().is_empty() => external(&url),
            _ => start_cluster(),
        })
        .as_ref()
        .map_err(String::as_str)
}

fn external(url: &str) -> Result<Server, String> {
    let config = Config::from_str(url).map_err(|err| format!("{DATABASE_URL} is not a valid URL: {err}"))?;
    let address = Address::of(&config)?;
    let admin_db = config.get_dbname().unwrap_or("postgres").to_owned();
    Ok(Server {
        admin_url: address.url(&admin_db),
        describe: format!("{DATABASE_URL}, database {admin_db}"),
        address,
        external: true,
        _guardian: None,
    })
}

/// Where a server listens and as whom to connect.
struct Address {
    host: Host,
    port: u16,
    user: String,
    password: Option<Vec<u8>>,
}

impl Address {
    fn of(config: &Config) -> Result<Address, String> {
        let host = config
            .get_hosts()
            .first()
            .cloned()
            .unwrap_or_else(|| Host::Tcp("localhost".to_owned()));
        Ok(Address {
            host,
            port: config.get_ports().first().copied().unwrap_or(PORT),
            user: config
                .get_user()
                .ok_or_else(|| format!("{DATABASE_URL} names no user"))?
                .to_owned(),
            password: config.get_password().map(<[u8]>::to_vec),
        })
    }

    /// A `postgresql://` URL of database `dbname` (a Unix socket folder goes, percent-encoded, in the host part).
    fn url(&self, dbname: &str) -> String {
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
fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A PostgreSQL identifier, quoted.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The server binaries: `initdb` and `pg_ctl`.
struct Binaries {
    initdb: PathBuf,
    pg_ctl: PathBuf,
}

fn find_binaries() -> Result<Binaries, String> {
    let in_dir = |dir: &Path| {
        let (initdb, pg_ctl) = (dir.join("initdb"), dir.join("pg_ctl"));
        (initdb.is_file() && pg_ctl.is_file()).then_some(Binaries { initdb, pg_ctl })
    };
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(found) = on_path.iter().find_map(|dir| in_dir(dir)) {
        return Ok(found);
    }
    // Debian and Ubuntu keep the server binaries off PATH, one folder per major version: take the newest.
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort();
    if let Some(found) = versions.iter().rev().find_map(|(_, dir)| in_dir(dir)) {
        return Ok(found);
    }
    if let Ok(output) = Command::new("pg_config").arg("--bindir").output() {
        let dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if let Some(found) = in_dir(Path::new(&dir)) {
            return Ok(found);
        }
    }
    Err(
        "no PostgreSQL server binaries (initdb, pg_ctl) on PATH, in /usr/lib/postgresql/*/bin or at \
         `pg_config --bindir`"
            .to_owned(),
    )
}

/// Runs the cluster's commands as the owner of its folder: the `postgres` user when the tests run as root
/// (`initdb` and `postgres` refuse to run as root), else the current user.
struct RunAs {
    prefix: Vec<String>,
}

impl RunAs {
    fn command(&self, program: &Path) -> Command {
        match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut command = Command::new(first);
                command.args(rest).arg(program);
                command
            }
            None => Command::new(program),
        }
    }
}

/// Looks up a user's numeric id or group id with `id`.
fn id_of(flag: &str, user: &str) -> Result<u32, String> {
    let output = Command::new("id")
        .args([flag, user])
        .output()
        .map_err(|err| format!("cannot run `id {flag} {user}`: {err}"))?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("the tests run as root, and there is no `{user}` user to run PostgreSQL as"))
}

/// Runs `command` to completion with its output in `log`; an error quotes the log's end.
fn run_logged(mut command: Command, log: &Path, what: &str) -> Result<(), String> {
    let file = fs::File::create(log).map_err(|err| format!("cannot create {}: {err}", log.display()))?;
    let err_file = file
        .try_clone()
        .map_err(|err| format!("cannot reopen {}: {err}", log.display()))?;
    let status = command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file)
        .status()
        .map_err(|err| format!("cannot run {what}: {err}"))?;
    if status.success() {
        return Ok(());
    }
    let text = fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!("{what} failed ({status}):\n{}", tail.join("\n")))
}

fn start_cluster() -> Result<Server, String> {
    let cluster = launch("headstart-pg", PORT, None)?;
    let address = Address {
        host: Host::Unix(cluster.sockets.clone()),
        port: PORT,
        user: SUPERUSER.to_owned(),
        password: None,
    };
    Ok(Server {
        admin_url: address.url("postgres"),
        describe: format!("throwaway cluster in {}", cluster.base.display()),
        address,
        external: false,
        _guardian: Some(Mutex::new(cluster.guardian)),
    })
}

/// A running throwaway cluster.
struct Cluster {
    /// Its private folder.
    base: PathBuf,
    /// The folder of its Unix socket (`.s.PGSQL.<port>`), where its superuser connects without a password.
    sockets: PathBuf,
    /// Stops it when this pipe closes, at the process's end.
    guardian: ChildStdin,
}

/// Configures a cluster between `initdb` and its start: it gets the cluster's folder, the data folder and the
/// owner to give new files to (`Some((uid, gid))` when the tests run as root), and returns extra server options.
type Configure<'a> = &'a dyn Fn(&Path, &Path, Option<(u32, u32)>) -> Result<String, String>;

/// Starts a throwaway cluster in a new folder named after `name`, on `port` (the socket's name; TCP only if
/// `configure` adds `listen_addresses`).
fn launch(name: &str, port: u16, configure: Option<Configure<'_>>) -> Result<Cluster, String> {
    let binaries = find_binaries()?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let base = std::env::temp_dir().join(format!("{name}-{}-{nanos:x}", std::process::id()));
    fs::create_dir(&base).map_err(|err| format!("cannot create {}: {err}", base.display()))?;
    let (data, sockets) = (base.join("data"), base.join("sockets"));
    fs::create_dir(&sockets).map_err(|err| format!("cannot create {}: {err}", sockets.display()))?;

    let root = fs::metadata(&base).map_err(|err| err.to_string())?.uid() == 0;
    let mut owner = None;
    let run_as = if root {
        let (uid, gid) = (id_of("-u", SUPERUSER)?, id_of("-g", SUPERUSER)?);
        owner = Some((uid, gid));
        for dir in [&base, &sockets] {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .map_err(|err| format!("cannot give {} to the {SUPERUSER} user: {err}", dir.display()))?;
        }
        let runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"]
            .into_iter()
            .map(Path::new)
            .find(|path| path.is_file())
            .ok_or_else(|| {
                format!("the tests run as root and need runuser (util-linux) to run PostgreSQL as {SUPERUSER}")
            })?;
        RunAs {
            prefix: vec![
                runuser.display().to_string(),
                "-u".to_owned(),
                SUPERUSER.to_owned(),
                "--".to_owned(),
            ],
        }
    } else {
        RunAs { prefix: Vec::new() }
    };

    // The guardian first, so that whatever happens next, the folder (and a server, once started) goes away with
    // this process.
    let guardian = spawn_guardian(&run_as, &binaries, &base, &data)?;

    let mut initdb = run_as.command(&binaries.initdb);
    initdb.arg("--pgdata").arg(&data).args([
        "--username",
        SUPERUSER,
        "--auth",
        "trust",
        "--encoding",
        "UTF8",
        "--no-locale",
        "--no-sync",
    ]);
    run_logged(initdb, &base.join("initdb.log"), "initdb")?;

    let extra = match configure {
        Some(configure) => configure(&base, &data, owner)?,
        None => "-c listen_addresses=''".to_owned(),
    };
    let settings = format!(
        "{extra} -k '{}' -p {port} -c fsync=off -c full_page_writes=off -c max_connections=400 \
         -c shared_buffers=32MB",
        sockets.display()
    );
    let mut pg_ctl = run_as.command(&binaries.pg_ctl);
    pg_ctl
        .arg("--pgdata")
        .arg(&data)
        .arg("--log")
        .arg(base.join("server.log"))
        .args(["--wait", "--timeout", "120", "-o", &settings, "start"]);
    run_logged(pg_ctl, &base.join("pg_ctl.log"), "pg_ctl start").map_err(|err| {
        let server_log = fs::read_to_string(base.join("server.log")).unwrap_or_default();
        format!("{err}\nserver log:\n{server_log}")
    })?;
    Ok(Cluster {
        base,
        sockets,
        guardian,
    })
}

/// Starts the process that stops the cluster and deletes its folder once its standard input closes: when this
/// process ends, however it ends, the kernel closes the pipe's only write end (Rust opens pipes close-on-exec, so
/// no child inherits it). It ignores the terminal's interrupt and hang-up, so a Ctrl-C that kills the tests still
/// leaves it to clean up.
fn spawn_guardian(run_as: &RunAs, binaries: &Binaries, base: &Path, data: &Path) -> Result<ChildStdin, String> {
    let mut stop: Vec<&std::ffi::OsStr> = Vec::new();
    stop.extend(run_as.prefix.iter().map(std::ffi::OsStr::new));
    stop.push(binaries.pg_ctl.as_os_str());
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"trap '' INT HUP TERM; cat >/dev/null; "$@" >/dev/null 2>&1; rm -rf "$HEADSTART_PG_BASE""#)
        .arg("headstart-pg-guardian")
        .args(stop)
        .arg("--pgdata")
        .arg(data)
        .args(["--mode", "immediate", "--wait", "stop"])
        .env("HEADSTART_PG_BASE", base)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child: Child = command
        .spawn()
        .map_err(|err| format!("cannot start the cluster's guardian: {err}"))?;
    child
        .stdin
        .take()
        .ok_or_else(|| "the cluster's guardian has no standard input".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_socket_folders_and_credentials() {
        let address = Address {
            host: Host::Unix(PathBuf::from("/tmp/headstart pg/sockets")),
            port: 5432,
            user: "postgres".to_owned(),
            password: None,
        };
        let url = address.url("headstart_test_1_0");
        assert_eq!(
            url,
            "postgresql://postgres@%2Ftmp%2Fheadstart%20pg%2Fsockets:5432/headstart_test_1_0"
        );
        let config = Config::from_str(&url).expect("parses");
        assert_eq!(
            config.get_hosts(),
            &[Host::Unix(PathBuf::from("/tmp/headstart pg/sockets"))]
        );
        assert_eq!(config.get_dbname(), Some("headstart_test_1_0"));

        let address = Address {
            host: Host::Tcp("::1".to_owned()),
            port: 6543,
            user: "a@b".to_owned(),
            password: Some(b"p:w/d".to_vec()),
        };
        let config = Config::from_str(&address.url("db")).expect("parses");
        assert_eq!(config.get_user(), Some("a@b"));
        assert_eq!(config.get_password(), Some(&b"p:w/d"[..]));
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
    }
}
