//! Runs one argv as a real process on this machine (spec §8.3): the node host's hands.
//!
//! What it guarantees:
//! - **argv, not a shell string**: `argv[0]` is executed with `argv[1..]`; no shell is involved
//!   unless the argv names one.
//! - **its own process group**: the child is the leader of a new group, so on timeout or
//!   cancellation `SIGKILL` reaches every process it started (`sh -c 'a & b'` included).
//!   A process that leaves the group on purpose (`setsid`) escapes; nothing short of a
//!   container stops that.
//! - **a bounded result**: at most [`RunSpec::output_cap`] bytes of stdout and stderr
//!   combined are kept; the pipes are drained to the end regardless, so a chatty child never
//!   blocks on a full pipe. Overflow appends [`TRUNCATION_MARKER`] to stderr when stderr is
//!   non-empty, else to stdout.
//! - **a bounded time**: the timeout covers the command *and* its output: a background process
//!   that keeps the pipes open keeps the run going until the deadline, when the group is killed
//!   and `timed_out` is set. A background process whose output is redirected elsewhere is left
//!   running after the command exits.
//! - **never panics**: a missing binary, a bad cwd or an empty argv come back as
//!   [`RunOutcome::error`].
//!
//! The environment is exactly [`RunSpec::env`]; [`child_environment`] builds it from the
//! node's own environment with the keys that inject code removed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// Bytes of stdout and stderr kept, combined (spec §8.3).
pub const DEFAULT_OUTPUT_CAP: usize = 200_000;

/// Appended to stderr (or stdout when stderr is empty) when output was cut at the cap.
pub const TRUNCATION_MARKER: &str = "\n... (truncated)";

/// The error of a run cut short because the node host is stopping.
pub const INTERRUPTED_ERROR: &str = "interrupted: node host stopping";

/// How long to wait for the pipes to close after the group was killed. Only a process that
/// left the group (and still holds a pipe) makes this wait run out.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Read size for the pipes.
const READ_CHUNK: usize = 16 * 1024;

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// The program and its arguments. `argv[0]` is looked up on the `PATH` in [`Self::env`]
    /// when it has no `/`.
    pub argv: Vec<String>,
    /// The working directory; `None` inherits the node's.
    pub cwd: Option<PathBuf>,
    /// The full environment the child gets: nothing else is inherited. Build it with
    /// [`child_environment`].
    pub env: BTreeMap<String, String>,
    /// How long the command (and its output) may take before the group is killed.
    pub timeout: Duration,
    /// Bytes of stdout and stderr kept, combined.
    pub output_cap: usize,
}

impl RunSpec {
    /// A spec with no cwd and the default output cap.
    pub fn new(argv: Vec<String>, env: BTreeMap<String, String>, timeout: Duration) -> Self {
        Self {
            argv,
            cwd: None,
            env,
            timeout,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }
}

/// What happened when a command ran (the fields of the `system.run` result, spec §8.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The exit code; `None` when the process ended by a signal (a timeout included) or never
    /// started.
    pub exit_code: Option<i32>,
    /// True when the deadline passed and the group was killed.
    pub timed_out: bool,
    /// `exit_code == Some(0) && !timed_out && error.is_none()`.
    pub success: bool,
    /// Standard output, lossy UTF-8, capped.
    pub stdout: String,
    /// Standard error, lossy UTF-8, capped.
    pub stderr: String,
    /// Why the command did not run or did not finish (spawn failure, interruption).
    pub error: Option<String>,
    /// Wall time from the call to the result.
    pub duration: Duration,
}

impl RunOutcome {
    fn not_started(error: String, started: Instant) -> Self {
        Self {
            exit_code: None,
            timed_out: false,
            success: false,
            stdout: String::new(),
            stderr: String::new(),
            error: Some(error),
            duration: started.elapsed(),
        }
    }
}

/// Runs `spec` to completion, timeout or cancellation.
///
/// `cancel` carries the node's stop signal: when it becomes `true` the process group is
/// killed and the outcome's error is [`INTERRUPTED_ERROR`]. A dropped sender never cancels.
/// The caller decides whether to let running commands finish before signalling.
pub async fn run_command(spec: &RunSpec, mut cancel: watch::Receiver<bool>) -> RunOutcome {
    let started = Instant::now();
    let Some((program, args)) = spec.argv.split_first() else {
        return RunOutcome::not_started("empty command".to_owned(), started);
    };
    if program.is_empty() {
        return RunOutcome::not_started("empty program name".to_owned(), started);
    }
    if *cancel.borrow_and_update() {
        return RunOutcome::not_started(INTERRUPTED_ERROR.to_owned(), started);
    }
    if let Some(cwd) = &spec.cwd
        && !cwd.is_dir()
    {
        // Checked here because a bad cwd and a missing program both surface from spawn as
        // "No such file or directory".
        return RunOutcome::not_started(
            format!("cwd is not a directory: {}", cwd.display()),
            started,
        );
    }

    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(&spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return RunOutcome::not_started(format!("failed to start {program}: {err}"), started);
        }
    };
    // The leader's pid is the group id. Never 0 or 1: killpg(0) would hit our own group.
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 1)
        .map(Pid::from_raw);
    tracing::debug!(pid = ?group, program = %program, "command started");
    // If this future is dropped mid-run, the whole group dies with it, not just the leader.
    let mut guard = GroupGuard(group);

    let captured = Arc::new(Mutex::new(Captured::new(spec.output_cap)));
    let mut drain = tokio::spawn(drain_pipes(
        child.stdout.take(),
        child.stderr.take(),
        Arc::clone(&captured),
    ));
    // Nor does the reader outlive a dropped run (a process outside the group may hold a pipe).
    let _reader = AbortOnDrop(drain.abort_handle());

    let deadline = tokio::time::sleep(spec.timeout);
    tokio::pin!(deadline);
    let end = tokio::select! {
        biased;
        () = stopped(&mut cancel) => End::Cancelled,
        status = async {
            let status = child.wait().await;
            if let Err(err) = (&mut drain).await {
                tracing::warn!(error = %err, "output reader failed");
            }
            status
        } => End::Exited(status),
        () = &mut deadline => End::TimedOut,
    };

    let timed_out = matches!(end, End::TimedOut);
    let cancelled = matches!(end, End::Cancelled);
    let status = match end {
        End::Exited(status) => {
            // Finished on its own: background processes that let go of the pipes may live on.
            guard.disarm();
            status
        }
        End::TimedOut | End::Cancelled => {
            guard.disarm();
            kill_group(group, &mut child);
            // Reaps the leader; returns its status at once if it had already exited.
            let status = child.wait().await;
            match tokio::time::timeout(PIPE_GRACE, &mut drain).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %err, "output reader failed"),
                Err(_) => {
                    tracing::warn!(pid = ?group, "a process outside the group holds the output open");
                    drain.abort();
                }
            }
            status
        }
    };

    let mut error = cancelled.then(|| INTERRUPTED_ERROR.to_owned());
    let exit_code = match &status {
        // `None` for a signal exit.
        Ok(status) => status.code(),
        Err(err) => {
            error.get_or_insert_with(|| format!("failed to wait for {program}: {err}"));
            None
        }
    };
    let (stdout, stderr) = captured
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .finish();
    let success = exit_code == Some(0) && !timed_out && error.is_none();
    tracing::debug!(pid = ?group, ?exit_code, timed_out, success, "command ended");
    RunOutcome {
        exit_code,
        timed_out,
        success,
        stdout,
        stderr,
        error,
        duration: started.elapsed(),
    }
}

/// How the wait ended.
enum End {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

/// Resolves once `cancel` reads `true`; never when the sender is gone.
async fn stopped(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Kills the process group when dropped while armed.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0.take()
            && let Err(err) = killpg(group, Signal::SIGKILL)
            && err != Errno::ESRCH
        {
            tracing::warn!(pid = %group, error = %err, "could not kill the process group");
        }
    }
}

/// Aborts a task when dropped; a no-op once the task has finished.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// SIGKILLs the whole group; falls back to the leader alone if the group can't be signalled.
fn kill_group(group: Option<Pid>, child: &mut Child) {
    if let Some(group) = group {
        match killpg(group, Signal::SIGKILL) {
            // ESRCH: every member is already gone.
            Ok(()) | Err(Errno::ESRCH) => return,
            Err(err) => {
                tracing::warn!(pid = %group, error = %err, "could not kill the process group")
            }
        }
    }
    if let Err(err) = child.start_kill() {
        tracing::warn!(error = %err, "could not kill the command");
    }
}

/// The output kept so far, shared by the two pipe readers.
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    remaining: usize,
    truncated: bool,
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

impl Captured {
    fn new(cap: usize) -> Self {
        Self {
            stdout: Vec::new(),
            stderr: Vec::new(),
            remaining: cap,
            truncated: false,
        }
    }

    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        let kept = bytes.len().min(self.remaining);
        self.remaining -= kept;
        if kept < bytes.len() {
            self.truncated = true;
        }
        let target = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        target.extend_from_slice(&bytes[..kept]);
    }

    fn finish(&mut self) -> (String, String) {
        let mut stdout = String::from_utf8_lossy(&std::mem::take(&mut self.stdout)).into_owned();
        let mut stderr = String::from_utf8_lossy(&std::mem::take(&mut self.stderr)).into_owned();
        if self.truncated {
            if stderr.is_empty() {
                stdout.push_str(TRUNCATION_MARKER);
            } else {
                stderr.push_str(TRUNCATION_MARKER);
            }
        }
        (stdout, stderr)
    }
}

/// Reads both pipes to their end, keeping what fits under the cap.
async fn drain_pipes(
    stdout: Option<tokio::process::ChildStdout>, stderr: Option<tokio::process::ChildStderr>,
    captured: Arc<Mutex<Captured>>,
) {
    tokio::join!(
        pump(stdout, Stream::Stdout, &captured),
        pump(stderr, Stream::Stderr, &captured)
    );
}

async fn pump<R: AsyncRead + Unpin>(pipe: Option<R>, stream: Stream, captured: &Mutex<Captured>) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0_u8; READ_CHUNK];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(read) => captured
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(stream, &buf[..read]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::warn!(error = %err, "reading command output failed");
                return;
            }
        }
    }
}

/// Environment keys never passed to a command, compared case-insensitively: each makes a
/// loader, shell or interpreter run code the command did not name.
///
/// - `LD_*`, `DYLD_*`: the dynamic loader (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `DYLD_INSERT_LIBRARIES`);
/// - `BASH_FUNC_*`: exported bash functions, which shadow commands inside scripts;
/// - `BASH_ENV`, `ENV`: files non-interactive `bash` / POSIX `sh` source at start;
/// - `SHELLOPTS`, `BASHOPTS`, `PS4`, `PROMPT_COMMAND`, `IFS`: shell behaviour and hooks
///   (`PS4` is expanded, with command substitution, under `set -x`);
/// - `NODE_OPTIONS`, `NODE_PATH`: `--require` preloads and module shadowing for Node.js;
/// - `PYTHONSTARTUP`, `PYTHONPATH`, `PYTHONHOME`: Python startup files and module shadowing;
/// - `PERL5OPT`, `PERL5LIB`, `PERLLIB`, `PERL5DB`: Perl `-M` preloads and module shadowing;
/// - `RUBYOPT`, `RUBYLIB`: the same for Ruby;
/// - `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`: JVM agents;
/// - `GCONV_PATH`: glibc loads charset converters (shared objects) from there;
/// - `CLAWLESS_NODE_*`: the node host's own settings are not the job's business.
pub fn is_blocked_env_key(key: &str) -> bool {
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "CLAWLESS_NODE_"];
    const KEYS: &[&str] = &[
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "GCONV_PATH",
    ];
    let upper = key.to_ascii_uppercase();
    PREFIXES.iter().any(|prefix| upper.starts_with(prefix)) || KEYS.contains(&upper.as_str())
}

/// The environment a command gets: `base` (the node's own environment) without the
/// [blocked keys](is_blocked_env_key), then `overrides` on top.
///
/// `overrides` should already have passed the request's validation (spec §8.3 rejects
/// blocked keys outright). As a second line, blocked keys and `PATH` are dropped from them
/// here too: the approval resolved the executable on the node's own `PATH`, so a different
/// `PATH` could run a different binary than the one approved.
pub fn child_environment(
    base: &BTreeMap<String, String>, overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = base
        .iter()
        .filter(|(key, _)| !is_blocked_env_key(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    for (key, value) in overrides {
        if is_blocked_env_key(key) || key.eq_ignore_ascii_case("PATH") {
            tracing::warn!(key = %key, "dropped an environment override that should have been rejected");
            continue;
        }
        env.insert(key.clone(), value.clone());
    }
    env
}

#[cfg(test)]
mod tests;
