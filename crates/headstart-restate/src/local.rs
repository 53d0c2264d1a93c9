//! A Restate server on loopback, started from its binary for tests, benchmarks and trying headstart on Restate out:
//! one node ([`LocalServer::start`]) or a cluster of nodes with a replicated log ([`LocalServer::cluster`]). Every
//! process is killed when its handle drops, so none outlives its caller. These functions block (they wait for the
//! server's health endpoints); call them off an async runtime's worker threads or before one starts.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The pinned server version `.ci/run` installs (docs/restate.md).
pub const SERVER_VERSION: &str = "1.7.12";

/// Where `npm install --prefix DIR @restatedev/restate-server-linux-x64` puts the binary, under `DIR`.
pub const NPM_BINARY: &str = "node_modules/@restatedev/restate-server-linux-x64/bin/restate-server";

/// How long a node may take to answer on its health endpoints.
const START_WITHIN: Duration = Duration::from_secs(60);

/// The environment variable that sets how many partitions a new cluster's log has.
const PARTITIONS: &str = "RESTATE_DEFAULT_NUM_PARTITIONS";

/// The server binary: `RESTATE_SERVER` when set, else the npm package under `target/restate` (of
/// `CARGO_TARGET_DIR`, else of `workspace`), where `.ci/run` installs it. `Err` says where it looked and how to
/// install it.
pub fn find_server(workspace: &Path) -> Result<PathBuf, String> {
    let candidate = std::env::var_os("RESTATE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace.join("target"));
            target.join("restate").join(NPM_BINARY)
        });
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!(
            "no restate-server at {} (set RESTATE_SERVER, or `npm install --prefix target/restate \
             @restatedev/restate-server-linux-x64@{SERVER_VERSION}`)",
            candidate.display()
        ))
    }
}

/// One node's ports on loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    /// The ingress (`submit`, `attach`).
    pub ingress: u16,
    /// The admin API (`/deployments`, `/query`, `/health`).
    pub admin: u16,
    /// Node to node (and the metadata server).
    pub node: u16,
}

/// A running node.
#[derive(Debug)]
struct Node {
    ports: NodePorts,
    command: NodeCommand,
    process: Option<Child>,
}

/// What starts a node again after a kill: the binary, the environment, and the file its output goes to.
#[derive(Debug, Clone)]
struct NodeCommand {
    binary: PathBuf,
    env: Vec<(String, String)>,
    log: PathBuf,
}

impl NodeCommand {
    fn spawn(&self) -> Result<Child, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|error| format!("cannot open {}: {error}", self.log.display()))?;
        let errors = log
            .try_clone()
            .map_err(|error| format!("cannot open {}: {error}", self.log.display()))?;
        Command::new(&self.binary)
            .arg("--no-logo")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .env("DO_NOT_TRACK", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(errors)
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", self.binary.display()))
    }

    /// The last lines of the node's output, for an error that says why it did not start.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_LINES)..].join("\n")
    }
}

/// How many of a node's last output lines an error quotes.
const LOG_LINES: usize = 20;

/// How often a server is started on fresh ports before giving up: a free port found by binding port 0 can be taken
/// by another process before the node binds it, a node that cannot bind exits, and the next attempt picks others.
const ATTEMPTS: usize = 3;

/// A Restate server (one node or a cluster) on loopback, its data under a directory of the caller's.
#[derive(Debug)]
pub struct LocalServer {
    nodes: Vec<Node>,
}

impl LocalServer {
    /// One node on free ports, its data in `dir/restate-data` (a fresh server: data found there is removed); returns
    /// once its admin API and ingress answer. [`LocalServer::restart`] starts a killed node again on its data.
    ///
    /// Its log has one partition per core of this machine (`RESTATE_DEFAULT_NUM_PARTITIONS`, unless set in the
    /// environment): Restate's default, 24, costs a small machine a third of its throughput (docs/restate.md).
    pub fn start(binary: &Path, dir: &Path) -> Result<Self, String> {
        LocalServer::attempts(&[dir.join("restate-data")], || {
            let ports = free_ports()?;
            let data = dir.join("restate-data");
            let mut env = node_env(&ports, &data);
            if std::env::var_os(PARTITIONS).is_none() {
                let cores = std::thread::available_parallelism().map_or(1, usize::from);
                env.push((PARTITIONS.to_owned(), cores.to_string()));
            }
            Ok(vec![(
                ports,
                NodeCommand {
                    binary: binary.to_owned(),
                    env,
                    log: dir.join("restate-server.log"),
                },
            )])
        })
    }

    /// A cluster of `nodes` nodes (at least 3 to survive one loss) with the log replicated on 2, each node's data in
    /// `dir/node-N` (a fresh cluster: data found there is removed); the first node provisions the cluster. Returns once
    /// every node's admin API and ingress answer.
    pub fn cluster(binary: &Path, dir: &Path, nodes: usize) -> Result<Self, String> {
        let data: Vec<PathBuf> = (1..=nodes).map(|index| dir.join(format!("node-{index}"))).collect();
        LocalServer::attempts(&data, || {
            let ports = (0..nodes).map(|_| free_ports()).collect::<Result<Vec<_>, _>>()?;
            let metadata = format!(
                "[{}]",
                ports
                    .iter()
                    .map(|ports| format!("\"http://127.0.0.1:{}\"", ports.node))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            Ok(ports
                .iter()
                .enumerate()
                .map(|(index, ports)| {
                    let mut env = vec![
                        ("RESTATE_CLUSTER_NAME".to_owned(), "headstart-local".to_owned()),
                        ("RESTATE_DEFAULT_REPLICATION".to_owned(), "2".to_owned()),
                        ("RESTATE_METADATA_CLIENT__ADDRESSES".to_owned(), metadata.clone()),
                        ("RESTATE_NODE_NAME".to_owned(), format!("node-{}", index + 1)),
                        ("RESTATE_FORCE_NODE_ID".to_owned(), (index + 1).to_string()),
                        ("RESTATE_AUTO_PROVISION".to_owned(), (index == 0).to_string()),
                    ];
                    env.extend(node_env(ports, &dir.join(format!("node-{}", index + 1))));
                    (
                        *ports,
                        NodeCommand {
                            binary: binary.to_owned(),
                            env,
                            log: dir.join(format!("node-{}.log", index + 1)),
                        },
                    )
                })
                .collect())
        })
    }

    /// Starts the nodes `plan` describes (fresh ports each time) and waits until each answers, up to [`ATTEMPTS`]
    /// times; between attempts the nodes are killed and their data directories `data` removed.
    fn attempts(
        data: &[PathBuf],
        plan: impl Fn() -> Result<Vec<(NodePorts, NodeCommand)>, String>,
    ) -> Result<Self, String> {
        let mut failure = String::new();
        for _ in 0..ATTEMPTS {
            for dir in data {
                let _ = std::fs::remove_dir_all(dir);
            }
            let mut server = LocalServer::spawn(plan()?)?;
            match (0..server.nodes.len()).try_for_each(|index| server.wait_healthy(index)) {
                Ok(()) => return Ok(server),
                Err(error) => failure = error,
            }
        }
        Err(failure)
    }

    fn spawn(nodes: Vec<(NodePorts, NodeCommand)>) -> Result<Self, String> {
        let mut server = LocalServer { nodes: Vec::new() };
        for (ports, command) in nodes {
            // Pushed as soon as spawned, so a later failure still kills the nodes before it.
            let process = Some(command.spawn()?);
            server.nodes.push(Node {
                ports,
                command,
                process,
            });
        }
        Ok(server)
    }

    /// How many nodes it has (1 for [`LocalServer::start`]).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node `index`'s process id, while it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.nodes.get(index)?.process.as_ref().map(Child::id)
    }

    /// Node `index`'s ports (0 for a single node).
    pub fn ports(&self, index: usize) -> NodePorts {
        self.nodes[index.min(self.nodes.len() - 1)].ports
    }

    /// Node `index`'s ingress URL, `http://127.0.0.1:PORT`.
    pub fn ingress_url(&self, index: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports(index).ingress)
    }

    /// Node `index`'s admin API URL, `http://127.0.0.1:PORT`.
    pub fn admin_url(&self, index: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports(index).admin)
    }

    /// Kills node `index` with SIGKILL and reaps it.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut process) = self.nodes.get_mut(index).and_then(|node| node.process.take()) {
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    /// Starts node `index` again (after [`LocalServer::kill`]), on the same ports and data; returns once it answers.
    pub fn restart(&mut self, index: usize) -> Result<(), String> {
        let node = self.nodes.get_mut(index).ok_or_else(|| format!("no node {index}"))?;
        if node.process.is_none() {
            node.process = Some(node.command.spawn()?);
        }
        self.wait_healthy(index)
    }

    /// Waits until node `index` answers on its admin API and ingress; `Err` when it exits first or takes longer than
    /// [`START_WITHIN`], with the end of its output.
    fn wait_healthy(&mut self, index: usize) -> Result<(), String> {
        let ports = self.ports(index);
        let started = Instant::now();
        while get_status(ports.admin, "/health") != Some(200) || get_status(ports.ingress, "/restate/health").is_none()
        {
            let node = &mut self.nodes[index];
            let exited = node
                .process
                .as_mut()
                .and_then(|process| process.try_wait().ok().flatten());
            let why = match exited {
                Some(status) => format!("exited ({status})"),
                None if started.elapsed() > START_WITHIN => format!(
                    "did not answer on its admin port {} and ingress port {} within {} s",
                    ports.admin,
                    ports.ingress,
                    START_WITHIN.as_secs()
                ),
                None => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            return Err(format!(
                "restate-server node {} {why}; the end of its output ({}):\n{}",
                index + 1,
                node.command.log.display(),
                node.command.log_tail()
            ));
        }
        Ok(())
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        for index in 0..self.nodes.len() {
            self.kill(index);
        }
    }
}

/// A port nothing listens on now, on loopback.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|error| format!("no free port on loopback: {error}"))
}

/// What every node is told: its ports on loopback and its data directory.
fn node_env(ports: &NodePorts, data: &Path) -> Vec<(String, String)> {
    vec![
        (
            "RESTATE_INGRESS__BIND_ADDRESS".to_owned(),
            format!("127.0.0.1:{}", ports.ingress),
        ),
        (
            "RESTATE_ADMIN__BIND_ADDRESS".to_owned(),
            format!("127.0.0.1:{}", ports.admin),
        ),
        ("RESTATE_BIND_ADDRESS".to_owned(), format!("127.0.0.1:{}", ports.node)),
        (
            "RESTATE_ADVERTISED_ADDRESS".to_owned(),
            format!("http://127.0.0.1:{}", ports.node),
        ),
        ("RESTATE_BASE_DIR".to_owned(), data.display().to_string()),
    ]
}

fn free_ports() -> Result<NodePorts, String> {
    Ok(NodePorts {
        ingress: free_port()?,
        admin: free_port()?,
        node: free_port()?,
    })
}

/// A GET on loopback: the status line's code, or `None` when nothing answers.
fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_whitespace().nth(1)?.parse().ok()
}
