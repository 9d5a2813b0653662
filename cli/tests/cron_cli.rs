//! `clawless cron` through the real binary.
//!
//! - On a fresh state directory: a job added with `--at +1h --system-event` is listed (table
//!   and `--json`), takes a new name, is not due for `run --due`, has no runs, is removed,
//!   and the list is empty again.
//! - OpenClaw's flag errors fail with their exact sentence and a non-zero exit, before any
//!   state is opened.
//! - Against a running `clawless local` started with an admin token: a job added by
//!   `clawless cron` on its database fires in that process, and its run shows in `runs`;
//!   `POST /cron/admin/call` refuses a request without the token, `--url` with a wrong token
//!   fails, and with the right one it adds and lists jobs (the same jobs the database
//!   holds) and passes the service's error sentences through.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const TOKEN: &str = "cron-operator-token-0123456789";

/// `clawless cron --state-dir <root>/state <args…>`, run in `root` (so no ./clawless.yaml
/// of the checkout is read), with no URL or token from the environment unless `env` sets them.
fn cron(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .current_dir(root)
        .arg("cron")
        .arg("--state-dir")
        .arg(root.join("state"))
        .args(args)
        .env_remove("CLAWLESS_URL")
        .env_remove("CLAWLESS_ADMIN_TOKEN");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `cron …` and returns its stdout, failing the test unless it succeeded.
fn ok(root: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = cron(root, args, env);
    assert!(
        output.status.success(),
        "clawless cron {args:?} failed: {}{}",
        stdout(&output),
        stderr(&output)
    );
    stdout(&output)
}

fn ok_json(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    serde_json::from_str(&ok(root, args, env)).unwrap()
}

/// Runs `cron …` expecting failure; returns stderr.
fn fails(root: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = cron(root, args, env);
    assert!(
        !output.status.success(),
        "clawless cron {args:?} succeeded: {}",
        stdout(&output)
    );
    stderr(&output)
}

#[test]
fn a_job_is_added_listed_renamed_and_removed_in_the_local_state() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();

    let added = ok_json(
        root,
        &[
            "add",
            "--name",
            "tea",
            "--at",
            "+1h",
            "--system-event",
            "Tea is ready.",
            "--json",
        ],
        &[],
    );
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(added["sessionTarget"], "main");
    assert_eq!(added["payload"]["text"], "Tea is ready.");
    assert_eq!(added["schedule"]["kind"], "at");
    let next = added["state"]["nextRunAtMs"].as_u64().unwrap();
    let created = added["createdAtMs"].as_u64().unwrap();
    assert!(
        (3_590_000..=3_610_000).contains(&(next - created)),
        "+1h is an hour from now: {added}"
    );

    let table = ok(root, &["list"], &[]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one job: {table}");
    assert!(lines[0].starts_with("ID"), "{table}");
    assert!(lines[1].starts_with(&id), "{table}");
    assert!(lines[1].contains("tea"), "{table}");
    assert!(lines[1].contains("(in 1h)"), "{table}");
    assert!(lines[1].trim_end().ends_with("idle"), "{table}");

    let page = ok_json(root, &["list", "--json"], &[]);
    assert_eq!(page["total"], 1);
    assert_eq!(page["jobs"][0]["id"], id.as_str());

    let renamed = ok(root, &["update", &id, "--name", "green tea"], &[]);
    assert!(
        renamed.starts_with(&format!("Updated job {id} (green tea)")),
        "{renamed}"
    );
    let page = ok_json(root, &["list", "--json"], &[]);
    assert_eq!(page["jobs"][0]["name"], "green tea");

    assert_eq!(
        ok(root, &["run", &id, "--due"], &[]).trim(),
        "Not run: not-due"
    );
    let not_run = ok_json(root, &["run", &id, "--due", "--json"], &[]);
    assert_eq!(not_run["ran"], false);
    assert_eq!(not_run["reason"], "not-due");

    assert_eq!(ok(root, &["runs", &id], &[]).trim(), "No runs.");
    let runs = ok_json(root, &["runs", "--id", &id, "--json"], &[]);
    assert_eq!(runs["entries"], Value::Array(Vec::new()));

    let status = ok_json(root, &["status", "--json"], &[]);
    assert_eq!(status["enabled"], true);
    assert_eq!(status["jobs"], 1);
    assert_eq!(status["nextWakeAtMs"], next);

    assert_eq!(
        ok(root, &["remove", &id], &[]).trim(),
        format!("Removed job {id}")
    );
    assert_eq!(ok(root, &["list"], &[]).trim(), "No cron jobs.");
    assert_eq!(ok_json(root, &["list", "--json"], &[])["total"], 0);
    // Removing it again removes nothing, and says so with a failure.
    let output = cron(root, &["rm", &id], &[]);
    assert!(!output.status.success());
    assert!(stdout(&output).contains("nothing removed"));
}

#[test]
fn flag_errors_are_openclaws_sentences_and_fail() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let add = ["add", "--name", "n", "--every", "1h"];
    let with = |extra: &[&str]| {
        let mut args = add.to_vec();
        args.extend_from_slice(extra);
        fails(root, &args, &[])
    };
    for (extra, sentence) in [
        (
            &[][..],
            "Choose exactly one payload: --system-event or --message",
        ),
        (
            &["--system-event", "a", "--message", "b"][..],
            "Choose exactly one payload: --system-event or --message",
        ),
        (
            &["--message", "m", "--announce", "--no-deliver"][..],
            "Choose at most one of --announce or --no-deliver",
        ),
        (
            &["--system-event", "t", "--wake", "soon"][..],
            "--wake must be now or next-heartbeat",
        ),
    ] {
        let error = with(extra);
        assert!(error.contains(sentence), "{extra:?}: {error}");
    }
    // Rules of the job itself are the service's: a main job cannot take a message.
    let error = with(&["--session", "main", "--message", "m"]);
    assert!(
        error.contains(r#"main cron jobs require payload.kind="systemEvent""#),
        "{error}"
    );
    assert!(
        fails(root, &["wake", "--text", "x", "--mode", "later"], &[])
            .contains("--mode must be now or next-heartbeat")
    );
}

/// `--url <url> <args…>`.
fn with_url<'a>(url: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut full = vec!["--url", url];
    full.extend_from_slice(args);
    full
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `clawless local` process, killed on drop.
struct Local(Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _killed = self.0.kill();
        let _reaped = self.0.wait();
    }
}

/// `clawless local` on `port` with the offline model and the admin token set.
fn start_local(root: &Path, port: u16) -> Local {
    let log = root.join("local.log");
    let child = Command::new(BIN)
        .current_dir(root)
        .args(["local", "--no-node", "--port", &port.to_string()])
        .arg("--state-dir")
        .arg(root.join("state"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("CLAWLESS_ADMIN_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let local = Local(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "clawless local did not listen: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    local
}

#[tokio::test]
async fn jobs_reach_a_running_local_system_and_its_operator_route() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let port = free_port();
    let _local = start_local(root, port);
    let url = format!("http://127.0.0.1:{port}");

    // Added on the database, fired by the running process: the one-shot runs (and, done,
    // is deleted), and its run is in the log.
    let added = ok_json(
        root,
        &[
            "add",
            "--name",
            "tea",
            "--at",
            "+2s",
            "--system-event",
            "Tea is ready.",
            "--json",
        ],
        &[],
    );
    let id = added["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let runs = loop {
        let runs = ok_json(root, &["runs", &id, "--json"], &[]);
        if runs["entries"].as_array().is_some_and(|e| !e.is_empty()) {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not run: {}",
            std::fs::read_to_string(root.join("local.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(runs["entries"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["entries"][0]["status"], "ok", "{runs}");
    let text = ok(root, &["runs", &id], &[]);
    assert!(text.contains("  ok  "), "{text}");

    // The route refuses requests without the token before reading them.
    let http = reqwest::Client::new();
    let refused = http
        .post(format!("{url}/cron/admin/call"))
        .body(r#"{"action":"list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);

    let list = with_url(&url, &["list"]);
    let error = fails(root, &list, &[]);
    assert!(error.contains("CLAWLESS_ADMIN_TOKEN is not set"), "{error}");
    let error = fails(
        root,
        &list,
        &[("CLAWLESS_ADMIN_TOKEN", "not-the-operator-token-at-all")],
    );
    assert!(error.contains("refused the admin token"), "{error}");

    let token = [("CLAWLESS_ADMIN_TOKEN", TOKEN)];
    let add = with_url(
        &url,
        &[
            "add",
            "--name",
            "digest",
            "--every",
            "1h",
            "--message",
            "Summarize the inbox.",
            "--no-deliver",
            "--json",
        ],
    );
    let job = ok_json(root, &add, &token);
    assert_eq!(job["sessionTarget"], "isolated");
    assert_eq!(job["delivery"]["mode"], "none");
    let page = ok_json(root, &with_url(&url, &["list", "--json"]), &token);
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["jobs"][0]["id"], job["id"]);
    // The same job, read from the database directly.
    let local_page = ok_json(root, &["list", "--json"], &[]);
    assert_eq!(local_page["jobs"][0]["id"], job["id"]);
    let table = ok(root, &with_url(&url, &["list"]), &token);
    assert!(table.contains("every 1h"), "{table}");

    // The service's sentences come back through the route (400).
    let error = fails(
        root,
        &with_url(&url, &["update", "no-such-job", "--name", "x"]),
        &token,
    );
    assert!(
        error.contains("unknown cron job id: no-such-job"),
        "{error}"
    );
}
