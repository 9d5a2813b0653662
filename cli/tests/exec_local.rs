//! Exec on a node host, end to end in local mode, with real processes: `clawless local
//! --no-node` (the backend on SQLite), a real `clawless node run` paired with it, and real
//! commands. The offline model reads the skill the message names and runs its ` ```sh exec `
//! command through `exec`; each scenario is one skill, so each names its own command.
//!
//! Covered: allowed; approval asked then allow-once; allow-always (the same command then runs
//! without asking); denied in the chat; approval timeout (askFallback deny); command timeout;
//! security=deny; hostile jobs (forged, expired, for another node, a grant for another
//! command: deleted, never run); the node killed mid-job and restarted
//! (not run twice, the turn hears it was interrupted); node offline; node revoked (401);
//! `clawless exec check --node` answering from what the running node reported, as the node does.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawless_channels::sign;
use clawless_core::nodes::ExecQueue;
use clawless_local::sqlite::{SqliteDb, SqliteExecQueue};
use clawless_system_tests::{control_job, hostile_jobs};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");

/// `(skill name, command)`. Messages name the skill, e.g. "alpha greeting".
const SKILLS: &[(&str, &str)] = &[
    ("alpha-greeting", "echo hello-from-node"),
    ("bravo-listing", "ls /"),
    ("charlie-sleeper", "sleep 30"),
    ("echo-year", "date -u +%Y"),
    ("foxtrot-echo", "echo not-in-the-allowlist"),
];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Backend {
    root: tempfile::TempDir,
    port: u16,
    local: Option<Child>,
    node: Option<Child>,
    http: reqwest::Client,
    sent: usize,
    seen: usize,
}

impl Drop for Backend {
    fn drop(&mut self) {
        for child in [self.local.as_mut(), self.node.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn write_skill(dir: &Path, name: &str, command: &str) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: Test skill {name} for exec on a node host.\n---\n\n# {name}\n\nRun with exec:\n\n```sh exec\n{command}\n```\n"
        ),
    )
    .unwrap();
}

impl Backend {
    fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }

    fn node_home(&self) -> PathBuf {
        self.root.path().join("node")
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(extra_exec: &str) -> Self {
        let root = tempfile::tempdir().unwrap();
        let skills = root.path().join("skills");
        for (name, command) in SKILLS {
            write_skill(&skills, name, command);
        }
        let marker = root.path().join("marker.log");
        write_skill(
            &skills,
            "delta-marker",
            &format!(
                "echo start >> {m}; sleep 4; echo end >> {m}",
                m = marker.display()
            ),
        );
        let config = root.path().join("clawless.yaml");
        std::fs::write(
            &config,
            format!(
                "skills:\n  bundled: {}\nexec:\n  timeoutSec: 3\n  approvalTimeoutSec: 6\n  nodeOfflineAfterSec: 4\n{extra_exec}",
                skills.display()
            ),
        )
        .unwrap();
        let port = free_port();
        let mut backend = Self {
            root,
            port,
            local: None,
            node: None,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            sent: 0,
            seen: 0,
        };
        let local = Command::new(BIN)
            .args(["local", "--no-node", "--port", &port.to_string()])
            .arg("--state-dir")
            .arg(backend.state())
            .arg("--config")
            .arg(&config)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        backend.local = Some(local);
        backend.wait_until_listening();
        backend
    }

    fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        // Listening on the port is not enough: another process may hold it for a moment, and
        // the node commands below need the local registry that `clawless local` creates.
        let registry = self.state().join("clawless.db");
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() || !registry.is_file()
        {
            assert!(Instant::now() < deadline, "clawless local did not listen");
            if let Some(status) = self.local.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                for line in BufReader::new(self.local.as_mut().unwrap().stderr.take().unwrap())
                    .lines()
                    .map_while(Result::ok)
                {
                    err.push_str(&line);
                    err.push('\n');
                }
                panic!("clawless local exited {status}: {err}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `clawless exec check --node ID …` with `request` on stdin.
    fn exec_check(&self, node_id: &str, extra: &[&str], request: &Value) -> (bool, Value, String) {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .args(["exec", "check", "--node", node_id, "--state-dir"])
            .arg(self.state())
            .args(extra)
            .env_remove("CLAWLESS_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        (
            output.status.success(),
            serde_json::from_str(&stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn node_id(&self) -> String {
        let config = std::fs::read_to_string(self.node_home().join("node.json")).unwrap();
        let config: Value = serde_json::from_str(&config).unwrap();
        config["nodeId"].as_str().unwrap().to_owned()
    }

    fn clawless(&self, args: &[&str]) -> (bool, String, String) {
        let output = Command::new(BIN).args(args).output().unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn pair_node(&self, approvals: &Value) {
        let state = self.state();
        let (ok, code, err) =
            self.clawless(&["nodes", "pair", "--state-dir", state.to_str().unwrap()]);
        assert!(ok, "{err}");
        let home = self.node_home();
        let (ok, out, err) = self.clawless(&[
            "node",
            "pair",
            "--node-home",
            home.to_str().unwrap(),
            "--url",
            &self.url(),
            "--code",
            code.trim(),
        ]);
        assert!(ok, "{out}{err}");
        let mode = std::fs::metadata(home.join("node.json")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        self.set_policy(approvals);
    }

    fn set_policy(&self, approvals: &Value) {
        std::fs::write(
            self.node_home().join("exec-approvals.json"),
            serde_json::to_string_pretty(approvals).unwrap(),
        )
        .unwrap();
    }

    fn start_node(&mut self) {
        let node = Command::new(BIN)
            .args(["node", "run", "--heartbeat-secs", "1", "--node-home"])
            .arg(self.node_home())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.node = Some(node);
        // The first heartbeat reports the node active.
        std::thread::sleep(Duration::from_millis(1_500));
    }

    fn kill_node(&mut self) {
        if let Some(mut node) = self.node.take() {
            node.kill().unwrap();
            node.wait().unwrap();
        }
    }

    async fn say(&mut self, text: &str) {
        self.sent += 1;
        let secret = std::fs::read_to_string(self.state().join("generic.secret")).unwrap();
        let body = serde_json::to_vec(&json!({
            "message_id": format!("m-{}", self.sent),
            "chat_id": "exec-chat",
            "sender_id": "local-user",
            "text": text,
            "chat_type": "direct",
        }))
        .unwrap();
        let response = self
            .http
            .post(format!("{}/webhook/generic", self.url()))
            .header("content-type", "application/json")
            .header(
                "x-clawless-signature",
                sign(secret.trim().as_bytes(), &body),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 202);
    }

    /// The next reply in the chat (waits up to `secs`).
    async fn reply(&mut self, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let replies: Vec<Value> = self
                .http
                .get(format!(
                    "{}/local/replies/exec-chat?after={}&wait=2",
                    self.url(),
                    self.seen
                ))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if let Some(reply) = replies.first() {
                self.seen += 1;
                return reply["text"].as_str().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "no reply within {secs} s");
        }
    }

    /// Says `text` and returns the `/approve` code of the approval request that follows.
    async fn ask(&mut self, text: &str) -> String {
        self.say(text).await;
        let request = self.reply(30).await;
        assert!(request.contains("Approval required (id "), "{request}");
        request
            .split("Reply with: /approve ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned()
    }
}

fn policy(security: &str, allowlist: Value) -> Value {
    json!({
        "version": 1,
        "defaults": {"security": security, "ask": "on-miss", "askFallback": "deny"},
        "agents": {"*": {"allowlist": allowlist}}
    })
}

fn standard_allowlist() -> Value {
    json!([
        {"pattern": "/usr/bin/echo", "argPattern": "^hello-from-node$"},
        {"pattern": "/bin/echo", "argPattern": "^hello-from-node$"},
        {"pattern": "/usr/bin/sleep", "argPattern": "^30$"},
        {"pattern": "/bin/sleep", "argPattern": "^30$"}
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_asks_and_refuses_through_a_real_node_host() {
    let mut backend = Backend::start("");
    backend.pair_node(&policy("allowlist", standard_allowlist()));
    backend.start_node();

    // Allowed by an argv-bound allowlist entry: runs, the model answers with the output.
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(answer.contains("hello-from-node"), "{answer}");

    // Not in the allowlist: the chat is asked; allow-once runs it and says how it ended.
    let slug = backend.ask("bravo listing").await;
    backend.say(&format!("/approve {slug} allow-once")).await;
    let finished = backend.reply(30).await;
    assert!(finished.starts_with("Exec finished (node="), "{finished}");
    let answer = backend.reply(30).await;
    assert!(answer.contains("I ran `ls /`"), "{answer}");

    // Denied in the chat: nothing runs, the chat and the model hear why.
    let slug = backend.ask("bravo listing").await;
    backend.say(&format!("/approve {slug} deny")).await;
    let denied = backend.reply(30).await;
    assert!(
        denied.starts_with("Exec denied (node=") && denied.ends_with("user-denied): ls /"),
        "{denied}"
    );
    let answer = backend.reply(30).await;
    assert!(answer.contains("did not approve"), "{answer}");

    // allow-always: runs, and afterwards the same command runs without asking.
    let slug = backend.ask("echo year").await;
    backend.say(&format!("/approve {slug} allow-always")).await;
    assert!(backend.reply(30).await.starts_with("Exec finished"));
    let year = backend.reply(30).await;
    assert!(year.contains("I ran `date -u +%Y`"), "{year}");
    let (ok, shown, _) = backend.clawless(&[
        "nodes",
        "list",
        "--json",
        "--state-dir",
        backend.state().to_str().unwrap(),
    ]);
    assert!(ok);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    let granted = shown[0]["granted"].as_array().unwrap();
    assert_eq!(granted.len(), 1, "{shown}");
    assert!(granted[0]["argPattern"].as_str().is_some(), "{shown}");
    // The node takes the signed policy update from its queue or its next heartbeat.
    tokio::time::sleep(Duration::from_secs(2)).await;
    backend.say("echo year").await;
    let again = backend.reply(30).await;
    assert!(
        again.contains("I ran `date -u +%Y`"),
        "asked again: {again}"
    );

    // Approval timeout: askFallback deny.
    backend.ask("bravo listing").await;
    let timed_out = backend.reply(30).await;
    assert!(timed_out.contains("approval-timeout): ls /"), "{timed_out}");
    backend.reply(30).await;

    // Command timeout: killed at 3 s.
    backend.say("charlie sleeper").await;
    let answer = backend.reply(30).await;
    assert!(answer.contains("timed out"), "{answer}");

    // security=deny on the node: refused with the exact text.
    backend.set_policy(&policy("deny", standard_allowlist()));
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(
        answer.contains("SYSTEM_RUN_DISABLED: security=deny"),
        "{answer}"
    );
    backend.set_policy(&policy("allowlist", standard_allowlist()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_check_with_node_answers_from_what_the_running_node_reported() {
    let mut backend = Backend::start("");
    let mut approvals = policy("allowlist", standard_allowlist());
    approvals["agents"]["ops"] = json!({"security": "deny"});
    backend.pair_node(&approvals);
    let node_id = backend.node_id();

    // Paired but never run: no exec report yet, and the check says so.
    let (ok, _, err) =
        backend.exec_check(&node_id, &[], &json!({"command": "echo hello-from-node"}));
    assert!(!ok);
    assert!(err.contains("has not reported its exec policy"), "{err}");
    let (ok, _, err) = backend.exec_check("node-nobody", &[], &json!({"command": "ls"}));
    assert!(!ok && err.contains("no node node-nobody"), "{err}");

    backend.start_node();
    // Allowed by the node's argv-bound entry (the request's own policy and PATH are replaced).
    let (ok, allowed, err) = backend.exec_check(
        &node_id,
        &[],
        &json!({"command": "echo hello-from-node", "path": ["/nowhere"], "policy": {"security": "full"}}),
    );
    assert!(ok, "{err}");
    assert_eq!(allowed["nodeDecision"], "allowed", "{allowed}");
    assert_eq!(allowed["allowlistSatisfied"], true);
    // Another argument: the entry does not cover it, a person must approve.
    let (ok, asked, err) = backend.exec_check(&node_id, &[], &json!({"command": "echo other"}));
    assert!(ok, "{err}");
    assert_eq!(asked["requiresApproval"], true, "{asked}");
    assert_eq!(
        asked["nodeDecision"],
        "SYSTEM_RUN_DENIED: approval required"
    );
    // The agent's own rules apply.
    let (ok, denied, err) = backend.exec_check(
        &node_id,
        &["--agent", "ops"],
        &json!({"command": "echo hello-from-node"}),
    );
    assert!(ok, "{err}");
    assert_eq!(denied["nodeDecision"], "SYSTEM_RUN_DISABLED: security=deny");

    // And the node agrees: the allowed command runs, a command its policy misses is asked.
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(answer.contains("hello-from-node"), "{answer}");
    let (ok, listing, _) = backend.exec_check(&node_id, &[], &json!({"command": "ls /"}));
    assert!(ok);
    assert_eq!(listing["requiresApproval"], true, "{listing}");
    backend.ask("bravo listing").await;
    backend.reply(30).await; // the approval timeout's denial
    backend.reply(30).await; // and the model's answer

    // A command the node's reported policy misses on executables it described: the backend's
    // pre-check asks the chat itself; allow-once sends it with a grant and it runs.
    let (ok, missed, _) = backend.exec_check(
        &node_id,
        &[],
        &json!({"command": "echo not-in-the-allowlist"}),
    );
    assert!(ok);
    assert_eq!(missed["requiresApproval"], true, "{missed}");
    let slug = backend.ask("foxtrot echo").await;
    backend.say(&format!("/approve {slug} allow-once")).await;
    let finished = backend.reply(30).await;
    assert!(finished.starts_with("Exec finished (node="), "{finished}");
    let answer = backend.reply(30).await;
    assert!(answer.contains("not-in-the-allowlist"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_job_does_not_run_it_again_and_offline_or_revoked_nodes_get_nothing() {
    let mut backend = Backend::start("");
    backend.pair_node(&policy("allowlist", json!([])));
    backend.start_node();
    let marker = backend.root.path().join("marker.log");

    // Approved, started, then the node is killed mid-command and restarted.
    let slug = backend.ask("delta marker").await;
    backend.say(&format!("/approve {slug} allow-once")).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&marker).is_ok_and(|text| text.contains("start")) {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    backend.kill_node();
    backend.start_node();
    let notice = backend.reply(30).await;
    assert!(notice.starts_with("Exec finished"), "{notice}");
    let answer = backend.reply(30).await;
    assert!(
        answer.contains("stopped while the command was running"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(log.matches("start").count(), 1, "ran twice: {log}");

    // Offline: not seen for longer than nodeOfflineAfterSec.
    backend.kill_node();
    tokio::time::sleep(Duration::from_secs(6)).await;
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(answer.contains("offline"), "{answer}");

    // Revoked: the node's requests get 401 and the worker stops.
    backend.start_node();
    let node_id = std::fs::read_to_string(backend.node_home().join("node.json")).unwrap();
    let node_id: Value = serde_json::from_str(&node_id).unwrap();
    let node_id = node_id["nodeId"].as_str().unwrap().to_owned();
    let (ok, _, err) = backend.clawless(&[
        "nodes",
        "revoke",
        &node_id,
        "--state-dir",
        backend.state().to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = backend.node.as_mut().unwrap().try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "a revoked node kept running");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(!status.success());
    backend.node = None;
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(!answer.contains("hello-from-node"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_person_is_asked_the_approval_timeout_governs_and_a_silent_node_meets_its_deadline()
{
    // Deadlines at 3 s + 1 s, approval timeout at 6 s: the deadline passes first.
    let mut backend = Backend::start("  deadlineGraceSec: 1\n");
    backend.pair_node(&policy("allowlist", standard_allowlist()));
    backend.start_node();

    // The job's deadline passes while the chat is asked: nothing happens until the approval
    // timeout, which applies askFallback (deny).
    backend.ask("bravo listing").await;
    let timed_out = backend.reply(30).await;
    assert!(timed_out.contains("approval-timeout): ls /"), "{timed_out}");
    let answer = backend.reply(30).await;
    assert!(!answer.contains("sent no result"), "{answer}");

    // A node that dies after the job was sent (still counted online) never answers: the
    // job's deadline resolves the call.
    backend.kill_node();
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(
        answer.contains("sent no result before the deadline"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_jobs_on_the_node_queue_are_deleted_without_running() {
    let mut backend = Backend::start("");
    let mut allowlist = standard_allowlist();
    for touch in ["/usr/bin/touch", "/bin/touch"] {
        allowlist
            .as_array_mut()
            .unwrap()
            .push(json!({"pattern": touch}));
    }
    backend.pair_node(&policy("allowlist", allowlist));
    backend.start_node();
    let node: Value = serde_json::from_str(
        &std::fs::read_to_string(backend.node_home().join("node.json")).unwrap(),
    )
    .unwrap();
    let (node_id, secret, queue) = (
        node["nodeId"].as_str().unwrap(),
        node["secret"].as_str().unwrap(),
        node["queue"].as_str().unwrap(),
    );
    // Forged, expired, for another node, and carrying a grant for another command.
    let hostile = hostile_jobs(node_id, secret, backend.root.path());
    // And their well-formed twin, which runs: the hostile ones fail for what they are.
    let (control, control_marker) = control_job(node_id, secret, backend.root.path());
    let db = SqliteDb::open(backend.state().join("clawless.db")).unwrap();
    let queues = SqliteExecQueue::new(db);
    for (_, body, _) in &hostile {
        queues.send(queue, body).await.unwrap();
    }
    queues.send(queue, &control).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while queues.live_count(queue).await.unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "hostile jobs stayed on the queue"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (what, _, marker) in &hostile {
        assert!(!marker.exists(), "a job {what} ran");
    }
    assert!(control_marker.exists(), "the well-formed twin did not run");
    // The node is still at work: an allowed command runs.
    backend.say("alpha greeting").await;
    let answer = backend.reply(30).await;
    assert!(answer.contains("hello-from-node"), "{answer}");
}
