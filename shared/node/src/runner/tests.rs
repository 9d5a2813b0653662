//! Real processes: these tests spawn `sh`, `sleep`, `yes` and friends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use super::*;

fn path_env() -> BTreeMap<String, String> {
    BTreeMap::from([("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())])
}

fn spec(argv: &[&str]) -> RunSpec {
    RunSpec::new(
        argv.iter().map(|arg| (*arg).to_owned()).collect(),
        path_env(),
        Duration::from_secs(20),
    )
}

fn sh(script: &str) -> RunSpec {
    spec(&["/bin/sh", "-c", script])
}

/// A receiver whose sender lives as long as the test: never cancels.
fn never() -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
    std::mem::forget(sender);
    receiver
}

async fn run(spec: &RunSpec) -> RunOutcome {
    run_command(spec, never()).await
}

/// True while `pid` is a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

async fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !alive(pid)
}

#[tokio::test]
async fn echo_succeeds_with_its_output_on_stdout() {
    let outcome = run(&spec(&["echo", "hello", "node"])).await;
    assert_eq!(outcome.stdout, "hello node\n");
    assert_eq!(outcome.stderr, "");
    assert_eq!(outcome.exit_code, Some(0));
    assert!(outcome.success);
    assert!(!outcome.timed_out);
    assert_eq!(outcome.error, None);
}

#[tokio::test]
async fn a_non_zero_exit_code_is_reported_and_is_not_success() {
    let outcome = run(&sh("echo out; echo err >&2; exit 3")).await;
    assert_eq!(outcome.exit_code, Some(3));
    assert!(!outcome.success);
    assert_eq!(outcome.stdout, "out\n");
    assert_eq!(outcome.stderr, "err\n");
    assert_eq!(outcome.error, None);
}

#[tokio::test]
async fn a_signal_exit_has_no_exit_code() {
    let outcome = run(&sh("kill -9 $$")).await;
    assert_eq!(outcome.exit_code, None);
    assert!(!outcome.timed_out);
    assert!(!outcome.success);
}

#[tokio::test]
async fn argv_is_not_a_shell_string() {
    let outcome = run(&spec(&["echo", "$HOME; rm -rf /", "`id`"])).await;
    assert_eq!(outcome.stdout, "$HOME; rm -rf / `id`\n");
}

#[tokio::test]
async fn stdin_is_empty_so_a_reader_of_stdin_ends_at_once() {
    let outcome = run(&spec(&["cat"])).await;
    assert!(outcome.success);
    assert_eq!(outcome.stdout, "");
    assert!(outcome.duration < Duration::from_secs(5));
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_its_grandchildren() {
    // GIVEN a shell that starts a background sleep (printing its pid) and then sleeps itself
    let mut spec = sh("sleep 30 & echo $!; sleep 30");
    spec.timeout = Duration::from_millis(300);

    // WHEN it runs past its timeout
    let outcome = run(&spec).await;

    // THEN the run is cut short, flagged as timed out, with no exit code
    assert!(outcome.timed_out);
    assert!(!outcome.success);
    assert_eq!(outcome.exit_code, None);
    assert!(
        outcome.duration < Duration::from_secs(5),
        "{:?}",
        outcome.duration
    );
    // AND the grandchild is gone too
    let grandchild: i32 = outcome.stdout.trim().parse().expect("the pid was printed");
    assert!(
        gone_within(grandchild, Duration::from_secs(3)).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn a_background_process_holding_the_pipe_open_ends_at_the_timeout() {
    // The leader exits at once, but its background child keeps stdout open.
    let mut spec = sh("sleep 30 & echo $!; exit 0");
    spec.timeout = Duration::from_millis(300);
    let outcome = run(&spec).await;
    assert!(outcome.timed_out);
    assert!(!outcome.success);
    assert_eq!(outcome.exit_code, Some(0), "the leader's own exit is kept");
    let background: i32 = outcome.stdout.trim().parse().expect("the pid was printed");
    assert!(gone_within(background, Duration::from_secs(3)).await);
}

#[tokio::test]
async fn a_background_process_with_redirected_output_survives_a_normal_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let outcome = run(&sh(&format!(
        "sleep 5 >/dev/null 2>&1 & echo $! > {}",
        pid_file.display()
    )))
    .await;
    assert!(outcome.success);
    assert!(!outcome.timed_out);
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        alive(pid),
        "a detached background process is not ours to kill"
    );
    nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
}

#[tokio::test]
async fn output_beyond_the_cap_is_cut_and_marked_on_stdout_when_stderr_is_empty() {
    let outcome = run(&sh("yes | head -c 500000")).await;
    assert!(outcome.success, "{outcome:?}");
    assert_eq!(outcome.stderr, "");
    assert_eq!(
        outcome.stdout.len(),
        DEFAULT_OUTPUT_CAP + TRUNCATION_MARKER.len()
    );
    assert!(outcome.stdout.ends_with(TRUNCATION_MARKER));
    assert!(outcome.stdout.starts_with("y\ny\n"));
}

#[tokio::test]
async fn the_cap_counts_stdout_and_stderr_together_and_marks_stderr_when_it_has_text() {
    let outcome = run(&sh("echo oops >&2; sleep 0.5; yes | head -c 500000")).await;
    assert_eq!(outcome.stderr, format!("oops\n{TRUNCATION_MARKER}"));
    assert_eq!(outcome.stdout.len() + "oops\n".len(), DEFAULT_OUTPUT_CAP);
    assert!(!outcome.stdout.ends_with(TRUNCATION_MARKER));
}

#[tokio::test]
async fn a_chatty_command_is_drained_and_never_blocks_on_a_full_pipe() {
    let mut spec = sh("yes | head -c 20000000; echo done >&2");
    spec.output_cap = 10;
    spec.timeout = Duration::from_secs(30);
    let outcome = run(&spec).await;
    assert!(!outcome.timed_out);
    assert!(outcome.success);
    assert_eq!(
        outcome.stdout,
        format!("y\ny\ny\ny\ny\n{TRUNCATION_MARKER}")
    );
}

#[tokio::test]
async fn output_under_the_cap_is_not_marked() {
    let mut spec = sh("printf 12345");
    spec.output_cap = 5;
    let outcome = run(&spec).await;
    assert_eq!(outcome.stdout, "12345");
}

#[tokio::test]
async fn invalid_utf8_output_is_replaced_not_fatal() {
    let outcome = run(&sh("printf 'a\\377b'")).await;
    assert!(outcome.success);
    assert_eq!(outcome.stdout, "a\u{FFFD}b");
}

#[tokio::test]
async fn a_missing_binary_is_an_error_not_a_panic() {
    let outcome = run(&spec(&["clawless-surely-not-a-binary-xyz", "--help"])).await;
    assert!(!outcome.success);
    assert_eq!(outcome.exit_code, None);
    let error = outcome.error.expect("an error");
    assert!(
        error.contains("clawless-surely-not-a-binary-xyz"),
        "{error}"
    );
}

#[tokio::test]
async fn an_empty_argv_is_an_error() {
    let outcome = run(&spec(&[])).await;
    assert_eq!(outcome.error.as_deref(), Some("empty command"));
    assert!(!outcome.success);
}

#[tokio::test]
async fn the_command_runs_in_the_given_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(&["pwd"]);
    spec.cwd = Some(dir.path().to_path_buf());
    let outcome = run(&spec).await;
    let reported = PathBuf::from(outcome.stdout.trim());
    assert_eq!(
        reported.canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
}

#[tokio::test]
async fn a_missing_cwd_is_an_error_naming_it() {
    let mut spec = spec(&["pwd"]);
    spec.cwd = Some(PathBuf::from("/definitely/not/here"));
    let outcome = run(&spec).await;
    assert!(!outcome.success);
    let error = outcome.error.expect("an error");
    assert!(error.contains("/definitely/not/here"), "{error}");
}

#[tokio::test]
async fn the_child_gets_exactly_the_given_environment() {
    // SAFETY of the assertion: the test process has HOME set, the child must not see it.
    let mut spec = sh("echo \"$GREETING|${HOME-unset}\"");
    spec.env
        .insert("GREETING".to_owned(), "hi there".to_owned());
    let outcome = run(&spec).await;
    assert_eq!(outcome.stdout, "hi there|unset\n");
}

#[tokio::test]
async fn cancelling_kills_the_group_and_reports_the_interruption() {
    let (stop, receiver) = watch::channel(false);
    let mut spec = sh("sleep 30 & echo $!; sleep 30");
    spec.timeout = Duration::from_secs(60);
    let run = tokio::spawn(async move { run_command(&spec, receiver).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(true).unwrap();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.error.as_deref(), Some(INTERRUPTED_ERROR));
    assert!(!outcome.timed_out);
    assert!(!outcome.success);
    let grandchild: i32 = outcome.stdout.trim().parse().expect("the pid was printed");
    assert!(gone_within(grandchild, Duration::from_secs(3)).await);
}

#[tokio::test]
async fn an_already_cancelled_run_never_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let (_stop, receiver) = watch::channel(true);
    let outcome = run_command(&sh(&format!("touch {}", marker.display())), receiver).await;
    assert_eq!(outcome.error.as_deref(), Some(INTERRUPTED_ERROR));
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_dropped_stop_sender_does_not_cancel() {
    let (stop, receiver) = watch::channel(false);
    drop(stop);
    let outcome = run_command(&sh("sleep 0.1; echo ok"), receiver).await;
    assert!(outcome.success, "{outcome:?}");
    assert_eq!(outcome.stdout, "ok\n");
}

#[tokio::test]
async fn dropping_the_run_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let spec = sh(&format!(
        "sleep 30 & echo $! > {}; sleep 30",
        pid_file.display()
    ));
    let run = tokio::spawn(async move { run_command(&spec, never()).await });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !pid_file.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(gone_within(pid, Duration::from_secs(3)).await);
}

#[test]
fn child_environment_drops_code_injecting_keys_from_the_node_environment() {
    let base = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), "/home/me".to_owned()),
        ("LD_PRELOAD".to_owned(), "/tmp/evil.so".to_owned()),
        (
            "DYLD_INSERT_LIBRARIES".to_owned(),
            "/tmp/evil.dylib".to_owned(),
        ),
        ("BASH_ENV".to_owned(), "/tmp/evil.sh".to_owned()),
        ("BASH_FUNC_ls%%".to_owned(), "() { evil; }".to_owned()),
        (
            "NODE_OPTIONS".to_owned(),
            "--require /tmp/evil.js".to_owned(),
        ),
        (
            "CLAWLESS_NODE_HOME".to_owned(),
            "/home/me/.clawless/node".to_owned(),
        ),
        ("ld_preload".to_owned(), "/tmp/evil.so".to_owned()),
    ]);
    let env = child_environment(&base, &BTreeMap::new());
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["HOME", "PATH"]);
}

#[test]
fn child_environment_applies_overrides_but_never_blocked_keys_or_path() {
    let base = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("LANG".to_owned(), "C".to_owned()),
    ]);
    let overrides = BTreeMap::from([
        ("LANG".to_owned(), "en_US.UTF-8".to_owned()),
        ("FOO".to_owned(), "bar".to_owned()),
        ("PATH".to_owned(), "/tmp/evil".to_owned()),
        ("LD_LIBRARY_PATH".to_owned(), "/tmp/evil".to_owned()),
        ("PYTHONSTARTUP".to_owned(), "/tmp/evil.py".to_owned()),
        ("Env".to_owned(), "/tmp/evil.sh".to_owned()),
    ]);
    let env = child_environment(&base, &overrides);
    assert_eq!(
        env,
        BTreeMap::from([
            ("FOO".to_owned(), "bar".to_owned()),
            ("LANG".to_owned(), "en_US.UTF-8".to_owned()),
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ])
    );
}

#[tokio::test]
async fn a_blocked_key_never_reaches_the_process() {
    let base = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("BASH_ENV".to_owned(), "/tmp/evil.sh".to_owned()),
    ]);
    let mut spec = sh("env");
    spec.env = child_environment(&base, &BTreeMap::new());
    let outcome = run(&spec).await;
    assert!(outcome.stdout.contains("PATH=/usr/bin:/bin"));
    assert!(!outcome.stdout.contains("BASH_ENV"));
}
