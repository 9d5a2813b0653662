//! The node's table of backgrounded commands (spec §4.3): it owns their process sessions,
//! ids, output and exits, and keeps all of it on disk so a node restart loses none of it.
//!
//! # How a command runs
//!
//! A command that may be backgrounded (an exec job with `yieldMs` or `background`) does not
//! run as a child whose pipes the node reads. It runs under a tiny supervisor, `/bin/sh -c`
//! with a fixed script, leader of its own process group, that
//! - reads the command's stdin from a FIFO `<state>/processes/<id>/stdin`,
//! - appends the command's stdout and stderr (combined) to `<state>/processes/<id>/out`,
//! - writes the command's exit status to `<state>/processes/<id>/exit` when it ends.
//!
//! The node only reads those files, so the command and its supervisor go on when the node
//! host stops, and a restarted node simply resumes reading where the table (`meta.json`,
//! written atomically on every change) says it stopped: no output is lost, and the exit is
//! still seen. What a restart does lose: the node's end of the stdin FIFO (the command reads
//! end-of-file; `write` answers that stdin is not writable), and an exit whose supervisor
//! was killed from outside (the session then ends with `signal: "lost"`).
//!
//! An exit status above 128 is the shell's way of saying the command died of signal
//! `status - 128`; it is reported as that signal (`SIGTERM`, …), as OpenClaw does.
//!
//! # Caps and lifetime
//!
//! What the model sees is capped as the spec says: [`AGGREGATE_MAX_CHARS`] of aggregated
//! output, [`PENDING_MAX_CHARS`] of not-yet-polled output, [`TAIL_CHARS`] of tail. The file on
//! disk keeps everything the command wrote (its size is the command's business, as with a
//! `> file` redirect). Finished sessions are swept [`DEFAULT_CLEANUP_MS`] after they ended,
//! and never before their exit was acknowledged by the backend.
//!
//! # Pseudo-terminal
//!
//! `pty: true` runs the command under util-linux `script` (`script -qefc … /dev/null`),
//! started by the supervisor like any command: `script` owns the pseudo-terminal, relays the
//! FIFO into it and the terminal's output into `out`, so a pty session survives a node
//! restart like any other and `send-keys` `C-c` reaches the command as `SIGINT` through the
//! terminal's line discipline. A crate holding the pty master inside the node (portable-pty,
//! pty-process) would tie the terminal to the node process and lose it on restart. A node
//! without `script` refuses `pty: true` with a clear error.
//!
//! # Kill
//!
//! `kill` sends `SIGKILL` to the supervisor's whole process group: the command and every
//! child it started (a process that left the group with `setsid` escapes, as with the
//! foreground runner).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

use clawless_exec::node::wire::ProcessExit;
use nix::sys::signal::{Signal, killpg};
use nix::sys::stat::Mode;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::atomic::{ensure_private_dir, write_private};

/// The aggregated output a session keeps, in chars (spec §4.3).
pub const AGGREGATE_MAX_CHARS: usize = 200_000;
/// The not-yet-polled output a session keeps, in chars.
pub const PENDING_MAX_CHARS: usize = 30_000;
/// The tail of a session's output, in chars.
pub const TAIL_CHARS: usize = 2_000;
/// How long a finished session stays (`tools.exec.cleanupMs`, spec §4.3).
pub const DEFAULT_CLEANUP_MS: u64 = 30 * 60 * 1_000;
/// The shortest cleanup time honoured.
pub const MIN_CLEANUP_MS: u64 = 60 * 1_000;
/// The longest cleanup time honoured.
pub const MAX_CLEANUP_MS: u64 = 3 * 60 * 60 * 1_000;
/// The signal name of a session whose end the node could not observe.
pub const LOST_SIGNAL: &str = "lost";

/// The supervisor: `$1` is the session's folder, the rest is the command's argv.
const SUPERVISOR_SCRIPT: &str = r#"d=$1; shift
"$@" >>"$d/out" 2>&1 <"$d/stdin"
code=$?
printf '%s\n' "$code" >"$d/exit.part"
exec 3>"$d/exit.done"
"#;
/// The supervisor's `$0`, so it is recognisable in `ps` and in `/proc`.
const SUPERVISOR_NAME: &str = "clawless-supervisor";
/// Bytes read at most for pending output (the rest is dropped and flagged).
const PENDING_READ_BYTES: u64 = (PENDING_MAX_CHARS as u64) * 4;

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// Exit code; `None` for a signal or an unknown end.
    pub exit_code: Option<i32>,
    /// The signal (`SIGKILL`, …) or [`LOST_SIGNAL`].
    pub signal: Option<String>,
    /// When the node saw it end.
    pub ended_at_ms: u64,
    /// True when the job's timeout killed it.
    #[serde(default)]
    pub timed_out: bool,
}

impl Ended {
    /// Exit code 0, no signal.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.signal.is_none()
    }
}

/// One process session as `meta.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessMeta {
    /// The slug id.
    pub session_id: String,
    /// The agent that started it.
    pub agent_id: String,
    /// The session key that started it: the only one that sees it.
    pub session_key: String,
    /// The exec job that started it.
    pub exec_job_id: String,
    /// The command as the model wrote it.
    pub command: String,
    /// Its working directory as the job named it.
    pub cwd: Option<String>,
    /// The supervisor's pid, which is also the process group id.
    pub pid: Option<u32>,
    /// When it started.
    pub started_at_ms: u64,
    /// When the job's timeout kills it.
    pub kill_at_ms: Option<u64>,
    /// True once the exec call returned `running` (only those are listed and notified).
    pub backgrounded: bool,
    /// Bytes of `out` already handed out by `poll`.
    pub polled_offset: u64,
    /// True when the node killed it.
    pub kill_requested: bool,
    /// True when `write … eof` closed its stdin.
    pub stdin_closed: bool,
    /// Set once it ended.
    pub ended: Option<Ended>,
    /// True once the backend accepted its exit event.
    pub exit_acknowledged: bool,
}

impl ProcessMeta {
    /// `running`, `completed`, `failed` or `killed`.
    pub fn status(&self) -> &'static str {
        match &self.ended {
            None => "running",
            Some(_) if self.kill_requested => "killed",
            Some(ended) if ended.success() => "completed",
            Some(_) => "failed",
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The argv to run (already jailed when the job is sandboxed).
    pub argv: Vec<String>,
    /// The full environment.
    pub env: BTreeMap<String, String>,
    /// The working directory on this machine.
    pub cwd: Option<PathBuf>,
    /// The cwd as the job named it (for `details`).
    pub cwd_label: Option<String>,
    /// How long it may run; `None` for no limit.
    pub timeout_ms: Option<u64>,
    /// The agent.
    pub agent_id: String,
    /// The session key.
    pub session_key: String,
    /// The exec job.
    pub exec_job_id: String,
    /// The command as written.
    pub command: String,
    /// Run it in a pseudo-terminal (through `script`).
    pub pty: bool,
}

/// Output handed out by [`ProcessTable::drain_pending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// The new output (at most [`PENDING_MAX_CHARS`]).
    pub text: String,
    /// True when older pending output was dropped at the cap.
    pub truncated: bool,
}

/// The in-memory side of a session.
struct Entry {
    meta: ProcessMeta,
    /// The supervisor, when this node started it (reaped through it).
    child: Option<Child>,
    /// The node's end of the stdin FIFO, while open.
    stdin: Option<File>,
    /// Consecutive polls without new output (for `retryInMs`).
    empty_polls: u32,
}

/// Why a session could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An empty argv.
    #[error("empty command")]
    Empty,
    /// The cwd is not a folder.
    #[error("cwd is not a directory: {0}")]
    BadCwd(String),
    /// `pty: true` on a node without util-linux `script`.
    #[error("pty: true needs util-linux `script` on the node host's PATH")]
    NoPty,
    /// The session folder, FIFO or supervisor could not be made.
    #[error("failed to start the command: {0}")]
    Io(#[from] io::Error),
}

/// The table of process sessions.
pub struct ProcessTable {
    root: PathBuf,
    node_id: String,
    cleanup_ms: u64,
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl std::fmt::Debug for ProcessTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTable")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ProcessTable {
    /// Opens (or creates) the table under `root` and loads every session it holds. A
    /// session that was running when the node stopped is kept as backgrounded: its output
    /// and exit are reported like any other's.
    pub fn open(root: &Path, node_id: &str) -> io::Result<Self> {
        ensure_private_dir(root)?;
        let mut entries = BTreeMap::new();
        for dir in fs::read_dir(root)? {
            let dir = dir?.path();
            let Ok(bytes) = fs::read(dir.join("meta.json")) else {
                continue;
            };
            let mut meta: ProcessMeta = match serde_json::from_slice(&bytes) {
                Ok(meta) => meta,
                Err(err) => {
                    tracing::warn!(path = %dir.display(), error = %err, "unreadable process session; skipped");
                    continue;
                }
            };
            if !meta.backgrounded && meta.ended.is_none() {
                meta.backgrounded = true;
            }
            entries.insert(
                meta.session_id.clone(),
                Entry {
                    meta,
                    child: None,
                    stdin: None,
                    empty_polls: 0,
                },
            );
        }
        Ok(Self {
            root: root.to_path_buf(),
            node_id: node_id.to_owned(),
            cleanup_ms: DEFAULT_CLEANUP_MS,
            entries: Mutex::new(entries),
        })
    }

    /// Keeps finished sessions `cleanup_ms` (clamped to 1 min…3 h).
    pub fn with_cleanup_ms(mut self, cleanup_ms: u64) -> Self {
        self.cleanup_ms = cleanup_ms.clamp(MIN_CLEANUP_MS, MAX_CLEANUP_MS);
        self
    }

    /// How long finished sessions stay.
    pub fn cleanup_ms(&self) -> u64 {
        self.cleanup_ms
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn dir(&self, session_id: &str) -> PathBuf {
        self.root.join(session_id)
    }

    fn save(&self, meta: &ProcessMeta) {
        let path = self.dir(&meta.session_id).join("meta.json");
        let written = serde_json::to_vec_pretty(meta)
            .map_err(io::Error::other)
            .and_then(|bytes| write_private(&path, &bytes));
        if let Err(err) = written {
            tracing::warn!(path = %path.display(), error = %err, "could not save a process session");
        }
    }

    /// Starts `request` under the supervisor; answers the new session's id.
    pub fn start(&self, request: StartRequest, now_ms: u64) -> Result<String, StartError> {
        if request.argv.first().is_none_or(String::is_empty) {
            return Err(StartError::Empty);
        }
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(StartError::BadCwd(cwd.display().to_string()));
        }
        let argv = if request.pty {
            let script = find_on_path("script", request.env.get("PATH").map(String::as_str))
                .ok_or(StartError::NoPty)?;
            let mut quoted: Vec<String> = request.argv.iter().map(|arg| shell_quote(arg)).collect();
            // A node started in the background (`&`, nohup) ignores SIGINT, and so would its
            // children: `C-c` would not interrupt. GNU env puts the default back.
            if let Some(env) = default_signal_env() {
                let reset = [
                    env.display().to_string(),
                    "--default-signal=INT,QUIT".to_owned(),
                ];
                quoted.splice(0..0, reset.iter().map(|arg| shell_quote(arg)));
            }
            vec![
                script.display().to_string(),
                "-q".to_owned(),
                "-e".to_owned(),
                "-f".to_owned(),
                "-c".to_owned(),
                quoted.join(" "),
                "/dev/null".to_owned(),
            ]
        } else {
            request.argv.clone()
        };
        let mut env = request.env.clone();
        if request.pty {
            // `script` runs its command with `$SHELL -c`.
            env.insert("SHELL".to_owned(), "/bin/sh".to_owned());
            env.entry("TERM".to_owned())
                .or_insert_with(|| "xterm-256color".to_owned());
        }
        let mut entries = self.lock();
        let session_id = unique_slug(|slug| entries.contains_key(slug) || self.dir(slug).exists());
        let dir = self.dir(&session_id);
        ensure_private_dir(&dir)?;
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join("out"))?;
        let fifo = dir.join("stdin");
        nix::unistd::mkfifo(&fifo, Mode::S_IRUSR | Mode::S_IWUSR).map_err(io::Error::from)?;
        // Read-write, so opening never blocks and the supervisor's read side never waits.
        let stdin = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo)?;
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(SUPERVISOR_SCRIPT)
            .arg(SUPERVISOR_NAME)
            .arg(&dir)
            .args(&argv)
            .env_clear()
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let child = command.spawn()?;
        let meta = ProcessMeta {
            session_id: session_id.clone(),
            agent_id: request.agent_id,
            session_key: request.session_key,
            exec_job_id: request.exec_job_id,
            command: request.command,
            cwd: request.cwd_label,
            pid: Some(child.id()),
            started_at_ms: now_ms,
            kill_at_ms: request
                .timeout_ms
                .map(|timeout| now_ms.saturating_add(timeout)),
            backgrounded: false,
            polled_offset: 0,
            kill_requested: false,
            stdin_closed: false,
            ended: None,
            exit_acknowledged: false,
        };
        self.save(&meta);
        entries.insert(
            session_id.clone(),
            Entry {
                meta,
                child: Some(child),
                stdin: Some(stdin),
                empty_polls: 0,
            },
        );
        Ok(session_id)
    }

    /// Looks at every running session: notes the ones that ended (exit file, reaped
    /// supervisor, or a supervisor that is gone) and kills the ones past their timeout.
    /// Answers the ids of the sessions that ended now.
    pub fn refresh(&self, now_ms: u64) -> Vec<String> {
        let mut entries = self.lock();
        let mut ended_now = Vec::new();
        for entry in entries.values_mut() {
            if entry.meta.ended.is_some() {
                continue;
            }
            if let Some(kill_at) = entry.meta.kill_at_ms
                && now_ms >= kill_at
                && !entry.meta.kill_requested
            {
                kill_group(entry.meta.pid);
                entry.meta.kill_requested = true;
                self.save(&entry.meta);
            }
            let dir = self.dir(&entry.meta.session_id);
            if let Some(ended) = observe_end(&dir, entry, now_ms) {
                entry.stdin = None;
                entry.meta.ended = Some(ended);
                self.save(&entry.meta);
                ended_now.push(entry.meta.session_id.clone());
            }
        }
        ended_now
    }

    /// The meta of `session_id` when `session_key` may see it.
    pub fn get(&self, session_key: &str, session_id: &str) -> Option<ProcessMeta> {
        self.lock()
            .get(session_id)
            .filter(|entry| entry.meta.session_key == session_key)
            .map(|entry| entry.meta.clone())
    }

    /// The backgrounded sessions `session_key` may see, newest first.
    pub fn list(&self, session_key: &str) -> Vec<ProcessMeta> {
        let mut listed: Vec<ProcessMeta> = self
            .lock()
            .values()
            .filter(|entry| entry.meta.session_key == session_key && entry.meta.backgrounded)
            .map(|entry| entry.meta.clone())
            .collect();
        listed.sort_by(|a, b| {
            b.started_at_ms
                .cmp(&a.started_at_ms)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        listed
    }

    /// Marks a session backgrounded (its exec call returned `running`).
    pub fn mark_backgrounded(&self, session_id: &str) -> Option<ProcessMeta> {
        let mut entries = self.lock();
        let entry = entries.get_mut(session_id)?;
        entry.meta.backgrounded = true;
        self.save(&entry.meta);
        Some(entry.meta.clone())
    }

    /// The last [`AGGREGATE_MAX_CHARS`] of a session's output, and whether more was written.
    pub fn aggregated(&self, session_id: &str) -> (String, bool) {
        read_tail(&self.dir(session_id).join("out"), AGGREGATE_MAX_CHARS)
    }

    /// The last [`TAIL_CHARS`] of a session's output.
    pub fn tail(&self, session_id: &str) -> String {
        read_tail(&self.dir(session_id).join("out"), TAIL_CHARS).0
    }

    /// Hands out the output written since the last drain (at most [`PENDING_MAX_CHARS`]).
    pub fn drain_pending(&self, session_id: &str) -> Drained {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(session_id) else {
            return Drained {
                text: String::new(),
                truncated: false,
            };
        };
        let path = self.dir(session_id).join("out");
        let (text, end, truncated) = read_since(&path, entry.meta.polled_offset);
        if end != entry.meta.polled_offset {
            entry.meta.polled_offset = end;
            self.save(&entry.meta);
        }
        if text.is_empty() {
            entry.empty_polls = entry.empty_polls.saturating_add(1);
        } else {
            entry.empty_polls = 0;
        }
        Drained { text, truncated }
    }

    /// Consecutive polls of `session_id` that found no new output.
    pub fn empty_polls(&self, session_id: &str) -> u32 {
        self.lock()
            .get(session_id)
            .map_or(0, |entry| entry.empty_polls)
    }

    /// Writes `bytes` to a running session's stdin; `close` closes it afterwards. Answers
    /// the bytes written, or `None` when stdin is not writable.
    pub fn write_stdin(&self, session_id: &str, bytes: &[u8], close: bool) -> Option<usize> {
        let mut entries = self.lock();
        let entry = entries.get_mut(session_id)?;
        if entry.meta.ended.is_some() || entry.meta.stdin_closed {
            return None;
        }
        let stdin = entry.stdin.as_mut()?;
        let mut written = 0;
        while written < bytes.len() {
            match stdin.write(&bytes[written..]) {
                Ok(0) => break,
                Ok(count) => written += count,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                // A full pipe (the command does not read): what fitted was written.
                Err(_) => break,
            }
        }
        if close {
            entry.stdin = None;
            entry.meta.stdin_closed = true;
            self.save(&entry.meta);
        }
        Some(written)
    }

    /// Kills a running session's whole process group. False when it is not running.
    pub fn kill(&self, session_id: &str) -> bool {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(session_id) else {
            return false;
        };
        if entry.meta.ended.is_some() || entry.meta.pid.is_none() {
            return false;
        }
        kill_group(entry.meta.pid);
        entry.meta.kill_requested = true;
        self.save(&entry.meta);
        true
    }

    /// Deletes a session and its folder.
    pub fn remove(&self, session_id: &str) {
        let removed = self.lock().remove(session_id);
        // Reaps the supervisor (nobody else would); a killed one ends at once.
        if let Some(mut entry) = removed
            && let Some(child) = entry.child.as_mut()
        {
            if entry.meta.kill_requested {
                let _ = child.wait();
            } else {
                let _ = child.try_wait();
            }
        }
        let dir = self.dir(session_id);
        if let Err(err) = fs::remove_dir_all(&dir)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %dir.display(), error = %err, "could not remove a process session");
        }
    }

    /// The exit event of an ended session.
    pub fn exit_event(&self, meta: &ProcessMeta) -> Option<ProcessExit> {
        let ended = meta.ended.as_ref()?;
        Some(ProcessExit {
            node_id: self.node_id.clone(),
            agent_id: meta.agent_id.clone(),
            session_key: meta.session_key.clone(),
            session_id: meta.session_id.clone(),
            exec_job_id: meta.exec_job_id.clone(),
            command: meta.command.clone(),
            exit_code: ended.exit_code,
            signal: ended.signal.clone(),
            success: ended.success(),
            tail: self.tail(&meta.session_id),
            started_at_ms: meta.started_at_ms,
            ended_at_ms: ended.ended_at_ms,
            event_id: ProcessExit::event_id_for(&self.node_id, &meta.session_id),
        })
    }

    /// The exit events the backend has not acknowledged yet.
    pub fn unacknowledged_exits(&self) -> Vec<ProcessExit> {
        let metas: Vec<ProcessMeta> = self
            .lock()
            .values()
            .filter(|entry| {
                entry.meta.backgrounded
                    && entry.meta.ended.is_some()
                    && !entry.meta.exit_acknowledged
            })
            .map(|entry| entry.meta.clone())
            .collect();
        metas
            .iter()
            .filter_map(|meta| self.exit_event(meta))
            .collect()
    }

    /// Records that the backend accepted a session's exit event.
    pub fn acknowledge_exit(&self, session_id: &str) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(session_id) {
            entry.meta.exit_acknowledged = true;
            self.save(&entry.meta);
        }
    }

    /// Deletes finished sessions older than the cleanup time whose exit needs no more
    /// reporting. Answers how many went.
    pub fn sweep(&self, now_ms: u64) -> usize {
        let expired: Vec<String> = self
            .lock()
            .values()
            .filter(|entry| {
                entry.meta.ended.as_ref().is_some_and(|ended| {
                    now_ms.saturating_sub(ended.ended_at_ms) >= self.cleanup_ms
                        && (entry.meta.exit_acknowledged || !entry.meta.backgrounded)
                })
            })
            .map(|entry| entry.meta.session_id.clone())
            .collect();
        for session_id in &expired {
            self.remove(session_id);
        }
        expired.len()
    }
}

/// How a running session ended, if it did: its exit file first; else a supervisor that
/// is gone (reaped, or no longer alive) ended by a signal, or in an unknown way.
fn observe_end(dir: &Path, entry: &mut Entry, now_ms: u64) -> Option<Ended> {
    let from_file = |timed_out: bool| {
        read_exit_file(dir).map(|status| status_to_end(status, now_ms, timed_out))
    };
    let timed_out = entry.meta.kill_requested
        && entry
            .meta
            .kill_at_ms
            .is_some_and(|kill_at| now_ms >= kill_at);
    if let Some(ended) = from_file(timed_out) {
        if let Some(child) = entry.child.as_mut() {
            let _ = child.try_wait();
        }
        return Some(ended);
    }
    let gone = match entry.child.as_mut() {
        Some(child) => !matches!(child.try_wait(), Ok(None)),
        None => !supervisor_alive(entry.meta.pid, dir),
    };
    if !gone {
        return None;
    }
    // The supervisor may have written the file between the two looks.
    if let Some(ended) = from_file(timed_out) {
        return Some(ended);
    }
    let signal = if entry.meta.kill_requested {
        Signal::SIGKILL.as_str().to_owned()
    } else {
        LOST_SIGNAL.to_owned()
    };
    Some(Ended {
        exit_code: None,
        signal: Some(signal),
        ended_at_ms: now_ms,
        timed_out,
    })
}

/// The supervisor's exit status, once `exit.done` says `exit.part` is complete.
fn read_exit_file(dir: &Path) -> Option<i32> {
    if !dir.join("exit.done").exists() {
        return None;
    }
    fs::read_to_string(dir.join("exit.part"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A shell status: above 128 means death by signal `status - 128`.
fn status_to_end(status: i32, now_ms: u64, timed_out: bool) -> Ended {
    let signal = (status > 128)
        .then(|| Signal::try_from(status - 128).ok())
        .flatten();
    match signal {
        Some(signal) => Ended {
            exit_code: None,
            signal: Some(signal.as_str().to_owned()),
            ended_at_ms: now_ms,
            timed_out,
        },
        None => Ended {
            exit_code: Some(status),
            signal: None,
            ended_at_ms: now_ms,
            timed_out,
        },
    }
}

/// True when `pid` is still this session's supervisor (checked through `/proc` where there
/// is one, so a recycled pid is not taken for it).
fn supervisor_alive(pid: Option<u32>, dir: &Path) -> bool {
    let Some(pid) = pid
        .and_then(|pid| i32::try_from(pid).ok())
        .filter(|pid| *pid > 1)
    else {
        return false;
    };
    let proc_cmdline = PathBuf::from(format!("/proc/{pid}/cmdline"));
    if Path::new("/proc/self").exists() {
        return match fs::read(&proc_cmdline) {
            Ok(cmdline) => {
                let needle = dir.as_os_str().as_encoded_bytes();
                cmdline.split(|byte| *byte == 0).any(|arg| arg == needle)
            }
            Err(_) => false,
        };
    }
    nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok()
}

/// `SIGKILL` to the process group led by `pid` (never 0 or 1).
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid
        .and_then(|pid| i32::try_from(pid).ok())
        .filter(|pid| *pid > 1)
    else {
        return;
    };
    if let Err(err) = killpg(Pid::from_raw(pid), Signal::SIGKILL) {
        tracing::debug!(pid, error = %err, "killpg failed (already gone?)");
    }
}

/// The last `max_chars` chars of a file (lossy UTF-8), and whether anything was cut.
fn read_tail(path: &Path, max_chars: usize) -> (String, bool) {
    let Ok(mut file) = File::open(path) else {
        return (String::new(), false);
    };
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    // A char is at most 4 bytes.
    let read_bytes = (max_chars as u64).saturating_mul(4).min(size);
    let start = size - read_bytes;
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return (String::new(), false);
    }
    let text = String::from_utf8_lossy(&bytes);
    let (kept, cut) = last_chars(&text, max_chars);
    (kept, cut || start > 0)
}

/// The file's bytes from `offset` to its end, as text capped at [`PENDING_MAX_CHARS`]: the
/// text, the new offset, and whether anything was dropped.
fn read_since(path: &Path, offset: u64) -> (String, u64, bool) {
    let Ok(mut file) = File::open(path) else {
        return (String::new(), offset, false);
    };
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    if size <= offset {
        return (String::new(), offset, false);
    }
    let start = offset.max(size.saturating_sub(PENDING_READ_BYTES));
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return (String::new(), offset, false);
    }
    // Stop before a UTF-8 sequence the command has not finished writing.
    let complete = complete_utf8_prefix(&bytes);
    let end = start + complete as u64;
    let text = String::from_utf8_lossy(&bytes[..complete]);
    let (kept, cut) = last_chars(&text, PENDING_MAX_CHARS);
    (kept, end, cut || start > offset)
}

/// The length of `bytes` without a trailing, incomplete UTF-8 sequence (at most 3 bytes).
fn complete_utf8_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for the lead
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return len,
        };
        return if back < needed { len - back } else { len };
    }
    len
}

/// The last `max_chars` chars of `text`, and whether any were cut.
fn last_chars(text: &str, max_chars: usize) -> (String, bool) {
    let count = text.chars().count();
    if count <= max_chars {
        return (text.to_owned(), false);
    }
    (text.chars().skip(count - max_chars).collect(), true)
}

/// `program` on `path_env` (or the usual system folders).
fn find_on_path(program: &str, path_env: Option<&str>) -> Option<PathBuf> {
    path_env
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
        .filter(|dir| !dir.is_empty())
        .chain(["/usr/bin", "/bin"])
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
}

/// GNU `env`, when it supports `--default-signal` (checked once).
fn default_signal_env() -> Option<&'static Path> {
    static ENV: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let env = find_on_path("env", None)?;
        let works = Command::new(&env)
            .args(["--default-signal=INT,QUIT", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        works.then_some(env)
    })
    .as_deref()
}

/// `arg` as one POSIX shell word.
fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}

/// Adjectives of the word slugs.
const ADJECTIVES: &[&str] = &[
    "amber", "brave", "brisk", "calm", "clever", "cosmic", "crisp", "dapper", "eager", "fair",
    "fresh", "gentle", "glad", "golden", "grand", "happy", "keen", "kind", "lucky", "mellow",
    "mild", "neat", "nimble", "proud", "quick", "quiet", "rapid", "rosy", "sharp", "shy", "silver",
    "sleek", "snug", "steady", "sunny", "swift", "tidy", "vivid", "warm", "wise",
];
/// Nouns of the word slugs.
const NOUNS: &[&str] = &[
    "badger", "bison", "canyon", "cedar", "comet", "coral", "crane", "dune", "ember", "falcon",
    "fern", "fjord", "forest", "harbor", "heron", "lagoon", "lynx", "maple", "meadow", "mesa",
    "nebula", "orbit", "otter", "pine", "prairie", "quartz", "raven", "reef", "river", "sage",
    "shell", "summit", "thicket", "tundra", "valley", "willow", "wren", "zephyr", "atlas",
    "breeze",
];

/// A word slug (`swift-otter`) not `taken`: two words, three on collision, then suffixed.
fn unique_slug(taken: impl Fn(&str) -> bool) -> String {
    let pick = |words: &[&str]| words[fastrand::usize(..words.len())].to_owned();
    for _ in 0..12 {
        let slug = format!("{}-{}", pick(ADJECTIVES), pick(NOUNS));
        if !taken(&slug) {
            return slug;
        }
    }
    for _ in 0..12 {
        let slug = format!("{}-{}-{}", pick(ADJECTIVES), pick(ADJECTIVES), pick(NOUNS));
        if !taken(&slug) {
            return slug;
        }
    }
    let base = format!("{}-{}-{}", pick(ADJECTIVES), pick(ADJECTIVES), pick(NOUNS));
    let mut suffix = 2_u64;
    loop {
        let slug = format!("{base}-{suffix}");
        if !taken(&slug) {
            return slug;
        }
        suffix += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_words_and_avoid_taken_ones() {
        let slug = unique_slug(|_| false);
        assert_eq!(slug.split('-').count(), 2, "{slug}");
        let three = unique_slug(|slug| slug.split('-').count() == 2);
        assert_eq!(three.split('-').count(), 3, "{three}");
        let suffixed = unique_slug(|slug| !slug.ends_with("-2"));
        assert!(suffixed.ends_with("-2"), "{suffixed}");
    }

    #[test]
    fn an_incomplete_utf8_sequence_waits_for_the_next_read() {
        let snow = "a\u{2603}".as_bytes();
        assert_eq!(complete_utf8_prefix(snow), snow.len());
        assert_eq!(complete_utf8_prefix(&snow[..snow.len() - 1]), 1);
        assert_eq!(complete_utf8_prefix(&snow[..2]), 1);
        assert_eq!(complete_utf8_prefix(b"plain"), 5);
    }

    #[test]
    fn quoting_keeps_every_argument_one_word() {
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("a b"), "'a b'");
    }

    #[test]
    fn shell_statuses_above_128_are_signals() {
        assert_eq!(status_to_end(0, 1, false).exit_code, Some(0));
        assert_eq!(status_to_end(3, 1, false).exit_code, Some(3));
        let killed = status_to_end(137, 1, false);
        assert_eq!(
            (killed.exit_code, killed.signal.as_deref()),
            (None, Some("SIGKILL"))
        );
    }
}
