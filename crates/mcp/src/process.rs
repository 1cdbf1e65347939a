//! Stdio servers as child processes: a process group each, a cleared environment, stderr kept,
//! and nothing left behind.
//!
//! Each server leads its own process group (`process_group(0)`), so the signals of a shutdown
//! reach whatever it started (`npx` → `node`, a shell's `sleep`). Its environment is cleared but
//! for [`ENV_ALLOW_LIST`] and the configured `env`: API keys in the agent's environment are not
//! passed on. Shutdown closes stdin, waits, sends SIGTERM to the group, waits, sends SIGKILL to
//! the group and reaps the leader. When the leader exits on its own, the rest of its group is
//! killed at once. A [`GroupGuard`] kills the group when the server is dropped without a
//! shutdown, and a watchdog (`sh`, in the same group, reading a pipe only this process holds)
//! kills it when this process dies without running destructors (SIGKILL, `exit`).

use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::config::StdioServer;

/// The variables a server inherits from the agent's environment, when set.
pub const ENV_ALLOW_LIST: [&str; 10] = [
    "HOME", "PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL",
];

/// Bytes of a server's stderr kept for error messages.
pub(crate) const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// The last bytes a server wrote to stderr.
#[derive(Debug)]
pub(crate) struct StderrTail {
    bytes: Mutex<Vec<u8>>,
    closed: watch::Sender<bool>,
}

impl StderrTail {
    fn new() -> Self {
        Self {
            bytes: Mutex::new(Vec::new()),
            closed: watch::channel(false).0,
        }
    }

    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        bytes.extend_from_slice(chunk);
        if bytes.len() > STDERR_TAIL_BYTES * 2 {
            let cut = bytes.len() - STDERR_TAIL_BYTES;
            bytes.drain(..cut);
        }
    }

    /// The tail as text: at most [`STDERR_TAIL_BYTES`], starting at a line when it was cut.
    pub(crate) fn text(&self) -> String {
        let bytes = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        let from = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        let mut slice = &bytes[from..];
        if from > 0
            && let Some(nl) = slice.iter().position(|&b| b == b'\n')
            && nl < 512
        {
            slice = &slice[nl + 1..];
        }
        String::from_utf8_lossy(slice)
            .trim_start_matches('\u{fffd}')
            .trim_end()
            .to_owned()
    }

    /// Waits until the server's stderr is closed, at most `within` (a grandchild may hold it).
    pub(crate) async fn wait_closed(&self, within: Duration) {
        let mut rx = self.closed.subscribe();
        let _ = tokio::time::timeout(within, rx.wait_for(|c| *c)).await;
    }
}

/// Kills a process group when dropped, unless its leader is known to have exited (after which
/// the group was killed already, and its id may be reused).
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pgid: u32,
    leader_exited: Arc<AtomicBool>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.leader_exited.load(Ordering::Acquire) {
            signal_group(self.pgid, rustix::process::Signal::KILL);
        }
    }
}

fn signal_group(pgid: u32, signal: rustix::process::Signal) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // ESRCH (nobody left) is the expected answer once the group is gone.
    let _ = rustix::process::kill_process_group(pid, signal);
}

/// A running stdio server's process side. Its stdin and stdout go to the MCP transport.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    pid: u32,
    stderr: Arc<StderrTail>,
    exit: watch::Receiver<Option<ExitStatus>>,
    leader_exited: Arc<AtomicBool>,
    _guard: GroupGuard,
    _watchdog_stdin: Option<ChildStdin>,
}

impl ServerProcess {
    /// Starts `config` as `name`'s server: the process, its stdin and its stdout.
    pub(crate) fn spawn(
        name: &str,
        config: &StdioServer,
        watchdog: bool,
    ) -> Result<(Self, ChildStdin, ChildStdout), String> {
        let mut cmd = Command::new(&config.command);
        cmd.args(&config.args).env_clear();
        for key in ENV_ALLOW_LIST {
            if let Some(value) = std::env::var_os(key) {
                cmd.env(key, value);
            }
        }
        cmd.envs(&config.env);
        if let Some(cwd) = &config.cwd {
            if !cwd.is_dir() {
                return Err(format!(
                    "its working directory {} does not exist",
                    cwd.display()
                ));
            }
            cmd.current_dir(cwd);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| describe_spawn_error(config, &e))?;
        let Some(pid) = child.id() else {
            return Err("the process exited as soon as it started".to_owned());
        };
        let leader_exited = Arc::new(AtomicBool::new(false));
        let guard = GroupGuard {
            pgid: pid,
            leader_exited: leader_exited.clone(),
        };
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("its standard streams could not be opened".to_owned());
        };

        let tail = Arc::new(StderrTail::new());
        let reader_tail = tail.clone();
        let server = name.to_owned();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tracing::debug!(
                            server = %server,
                            "stderr: {}",
                            String::from_utf8_lossy(&buf[..n]).trim_end()
                        );
                        reader_tail.push(&buf[..n]);
                    }
                }
            }
            reader_tail.closed.send_replace(true);
        });

        let (exit_tx, exit_rx) = watch::channel(None);
        let exited = leader_exited.clone();
        tokio::spawn(supervise(child, pid, exited, exit_tx));

        let watchdog_stdin = if watchdog { spawn_watchdog(pid) } else { None };
        Ok((
            Self {
                pid,
                stderr: tail,
                exit: exit_rx,
                leader_exited,
                _guard: guard,
                _watchdog_stdin: watchdog_stdin,
            },
            stdin,
            stdout,
        ))
    }

    /// The leader's process id, which is also the group's id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The stderr tail.
    pub(crate) fn stderr(&self) -> &StderrTail {
        &self.stderr
    }

    /// The leader's exit status, once it has exited.
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits for the leader to exit, at most `within`; its status if it did.
    pub(crate) async fn wait_exit(&self, within: Duration) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        match tokio::time::timeout(within, rx.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => *status,
            _ => self.exit_status(),
        }
    }

    /// Waits for the leader to exit (for as long as it runs); its status.
    pub(crate) async fn wait_exit_forever(&self) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(status) => *status,
            Err(_) => self.exit_status(),
        }
    }

    /// The rest of a shutdown, after the caller closed the server's stdin: wait, SIGTERM to the
    /// group, wait, SIGKILL to the group, wait for the leader to be reaped.
    pub(crate) async fn terminate(&self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.wait_exit(grace).await {
            return Some(status);
        }
        if !self.leader_exited.load(Ordering::Acquire) {
            signal_group(self.pid, rustix::process::Signal::TERM);
        }
        if let Some(status) = self.wait_exit(grace).await {
            return Some(status);
        }
        if !self.leader_exited.load(Ordering::Acquire) {
            signal_group(self.pid, rustix::process::Signal::KILL);
        }
        // SIGKILL cannot be ignored; this wait only covers the time to reap.
        self.wait_exit(Duration::from_secs(5)).await
    }
}

/// Reaps the leader; then kills what is left of its group, before its id can be reused.
async fn supervise(
    mut child: Child,
    pid: u32,
    leader_exited: Arc<AtomicBool>,
    exit: watch::Sender<Option<ExitStatus>>,
) {
    let status = child.wait().await;
    leader_exited.store(true, Ordering::Release);
    signal_group(pid, rustix::process::Signal::KILL);
    if let Ok(status) = status {
        exit.send_replace(Some(status));
    }
}

/// `sh` in the server's group, blocked reading a pipe whose other end only this process holds:
/// when this process dies, the read ends and the watchdog kills the group (itself included).
fn spawn_watchdog(pgid: u32) -> Option<ChildStdin> {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("read -r _ignored; kill -s KILL -- -\"$1\"")
        .arg("ba-mcp-watchdog")
        .arg(pgid.to_string())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(i32::try_from(pgid).ok()?)
        .kill_on_drop(true);
    // The server may have exited already, and its group with it: then there is nothing to watch.
    let mut child = cmd.spawn().ok()?;
    let stdin = child.stdin.take();
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    stdin
}

fn describe_spawn_error(config: &StdioServer, e: &std::io::Error) -> String {
    let command = &config.command;
    match e.kind() {
        std::io::ErrorKind::NotFound if command.contains('/') => {
            format!("the program `{command}` does not exist")
        }
        std::io::ErrorKind::NotFound => {
            let path = config
                .env
                .get("PATH")
                .cloned()
                .or_else(|| std::env::var("PATH").ok())
                .unwrap_or_default();
            format!("the program `{command}` was not found on PATH ({path})")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("the program `{command}` is not executable")
        }
        _ => format!("cannot start `{command}`: {e}"),
    }
}

/// `exited with status 3`, `was killed by signal 9`.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "stopped answering".to_owned(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => format!("exited ({s})"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_end_from_a_line_start() {
        let tail = StderrTail::new();
        for i in 0..2000 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let text = tail.text();
        assert!(text.len() <= STDERR_TAIL_BYTES);
        assert!(text.starts_with("line "), "{}", &text[..20]);
        assert!(text.ends_with("line 1999"));
    }

    #[tokio::test]
    async fn spawn_errors_name_the_program() {
        let missing = StdioServer {
            command: "ba-mcp-no-such-program".into(),
            args: vec![],
            env: [("PATH".to_owned(), "/nowhere".to_owned())].into(),
            cwd: None,
        };
        let err = ServerProcess::spawn("x", &missing, false).unwrap_err();
        assert_eq!(
            err,
            "the program `ba-mcp-no-such-program` was not found on PATH (/nowhere)"
        );
        let bad_cwd = StdioServer {
            command: "true".into(),
            args: vec![],
            env: Default::default(),
            cwd: Some("/no/such/dir".into()),
        };
        let err = ServerProcess::spawn("x", &bad_cwd, false).unwrap_err();
        assert!(err.contains("/no/such/dir"), "{err}");
    }

    #[tokio::test]
    async fn the_environment_is_cleared_but_for_the_allow_list() {
        let config = StdioServer {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "env >&2".into()],
            env: [("EXTRA".to_owned(), "1".to_owned())].into(),
            cwd: None,
        };
        let (process, _stdin, _stdout) = ServerProcess::spawn("x", &config, false).unwrap();
        process.wait_exit(Duration::from_secs(10)).await;
        process.stderr().wait_closed(Duration::from_secs(10)).await;
        let seen = process.stderr().text();
        for line in seen.lines() {
            let key = line.split('=').next().unwrap_or_default();
            assert!(
                ENV_ALLOW_LIST.contains(&key) || key == "EXTRA" || key == "PWD" || key == "SHLVL",
                "{key} leaked into the server's environment"
            );
        }
        assert!(seen.contains("EXTRA=1"));
    }
}
