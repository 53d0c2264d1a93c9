//! A child process that cannot outlive its test.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};

/// A child process killed with SIGKILL and reaped when the guard drops, so that a test that fails (or passes)
/// leaves nothing running: `std::process::Child` itself leaves its process running when dropped. A child started
/// with [`spawn_group`](Self::spawn_group) leads a process group of its own, and the whole group is killed, the
/// processes it started too.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    /// Whether the child leads its own process group (its id is the group's).
    group: bool,
}

impl ChildGuard {
    /// Starts `command`.
    pub fn spawn(command: &mut Command) -> std::io::Result<Self> {
        Ok(ChildGuard {
            child: command.spawn()?,
            group: false,
        })
    }

    /// Starts `command` as the leader of a new process group, for a child that starts processes of its own.
    pub fn spawn_group(command: &mut Command) -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt as _;
        Ok(ChildGuard {
            child: command.process_group(0).spawn()?,
            group: true,
        })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child's standard output, when it was piped.
    pub fn stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The child's standard error, when it was piped.
    pub fn stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// Sends `signal` (a name `kill` knows: `STOP`, `CONT`, `TERM`…) to the child, or to its group.
    pub fn signal(&self, signal: &str) {
        let target = self.target();
        let status = Command::new("kill")
            .args([format!("-{signal}"), "--".to_owned(), target.clone()])
            .stderr(Stdio::null())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {target}");
    }

    /// Waits for the child to exit (a group's other processes are left to [`kill`](Self::kill) or the drop).
    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().expect("wait for a child process")
    }

    /// Waits for the child to exit on its own; a child still running after `limit` fails the test (the drop kills
    /// it).
    pub fn wait_within(&mut self, limit: std::time::Duration) -> ExitStatus {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("poll a child process") {
                return status;
            }
            assert!(start.elapsed() < limit, "the child did not exit within {limit:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Kills the child (and its group) with SIGKILL and reaps it; a child that had already exited is reaped.
    pub fn kill(&mut self) -> ExitStatus {
        self.kill_quietly();
        self.wait()
    }

    /// Waits for the child to exit and collects its standard output and error (both must be piped).
    pub fn output(self) -> Output {
        self.collect(None)
    }

    /// As [`output`](Self::output), but a child still running after `limit` fails the test (it is killed first).
    pub fn output_within(self, limit: std::time::Duration) -> Output {
        self.collect(Some(limit))
    }

    fn collect(mut self, limit: Option<std::time::Duration>) -> Output {
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stderr = read(Box::new(self.child.stderr.take().expect("piped standard error")));
        let stdout = self.child.stdout.take().map(|out| read(Box::new(out)));
        let started = std::time::Instant::now();
        let status = loop {
            let Some(limit) = limit else { break self.wait() };
            if let Some(status) = self.child.try_wait().expect("poll a child process") {
                break status;
            }
            if started.elapsed() > limit {
                self.kill();
                panic!("the child process did not exit within {} s", limit.as_secs());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let stdout = stdout
            .map(|reader| reader.join().unwrap_or_default())
            .unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        Output { status, stdout, stderr }
    }

    /// The `kill` argument: the child's id, or its group's (negative).
    fn target(&self) -> String {
        if self.group {
            format!("-{}", self.child.id())
        } else {
            self.child.id().to_string()
        }
    }

    fn kill_quietly(&mut self) {
        if self.group {
            // The group outlives its leader while any member lives, so this reaches what the child started even
            // after the child itself exited.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &self.target()])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill_quietly();
        let _ = self.child.wait();
    }
}
