//! A throwaway PostgreSQL cluster: its binaries found, `initdb` and `pg_ctl` run as the right user, and the guardian
//! process that stops it and deletes its folder when the test process ends.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// The superuser of a throwaway cluster.
pub(super) const SUPERUSER: &str = "postgres";

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

/// A running throwaway cluster.
pub(super) struct Cluster {
    /// Its private folder.
    pub(super) base: PathBuf,
    /// The folder of its Unix socket (`.s.PGSQL.<port>`), where its superuser connects without a password.
    pub(super) sockets: PathBuf,
    /// Stops it when this pipe closes, at the process's end.
    pub(super) guardian: ChildStdin,
}

/// Configures a cluster between `initdb` and its start: it gets the cluster's folder, the data folder and the
/// owner to give new files to (`Some((uid, gid))` when the tests run as root), and returns extra server options.
pub(super) type Configure<'a> = &'a dyn Fn(&Path, &Path, Option<(u32, u32)>) -> Result<String, String>;

/// Starts a throwaway cluster in a new folder named after `name`, on `port` (the socket's name; TCP only if
/// `configure` adds `listen_addresses`).
pub(super) fn launch(name: &str, port: u16, configure: Option<Configure<'_>>) -> Result<Cluster, String> {
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
