//! Shared helpers for system tests: running a function under `cargo lambda watch` and
//! talking to it over plain HTTP on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repo root")
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A function served by `cargo lambda watch`; stopped (with everything it started) on drop.
pub struct LambdaWatch {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl LambdaWatch {
    /// Starts `cargo lambda watch` in the repository with `env` for the functions.
    ///
    /// # Panics
    /// When `cargo lambda` is not installed: `infra/test` puts it on PATH, and system tests
    /// must fail rather than pass without the emulator.
    pub fn start(env: &[(&str, String)]) -> Self {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("clawless-lambda-watch-{port}.log"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new("cargo");
        command
            .args([
                "lambda",
                "watch",
                "--ignore-changes",
                "--quiet",
                "-A",
                "127.0.0.1",
                "-P",
                &port.to_string(),
            ])
            .current_dir(repo_root())
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file);
        for (name, value) in env {
            command.env(name, value);
        }
        // Own process group, so drop can stop cargo-lambda and the function it spawned.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().unwrap_or_else(|err| {
            panic!("cannot start `cargo lambda watch` ({err}); run the tests through infra/test, which installs cargo-lambda")
        });
        Self { child, port, log }
    }

    /// The port `cargo lambda watch` listens on (function URLs are
    /// `http://127.0.0.1:<port>/lambda-url/<name>/…`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// GETs `path` of function `name` through its function URL, waiting up to `patience`
    /// for the first build; returns status and body.
    pub fn get(&mut self, name: &str, path: &str, patience: Duration) -> (u16, String) {
        self.call("GET", name, path, &[], &[], patience)
    }

    /// POSTs `body` with `headers` to `path` of function `name` through its function URL,
    /// waiting up to `patience` for the first build; returns status and body.
    ///
    /// A request is sent again only when no answer came, so warm a function up with a
    /// request without side effects before relying on one being sent exactly once.
    pub fn post(
        &mut self, name: &str, path: &str, headers: &[(&str, &str)], body: &[u8],
        patience: Duration,
    ) -> (u16, String) {
        self.call("POST", name, path, headers, body, patience)
    }

    /// Sends `method` with `headers` and `body` to `path` of function `name` through its
    /// function URL, waiting up to `patience` for the first build; returns status and body.
    pub fn call(
        &mut self, method: &'static str, name: &str, path: &str, headers: &[(&str, &str)],
        body: &[u8], patience: Duration,
    ) -> (u16, String) {
        let request = HttpRequest {
            method,
            path: format!("/lambda-url/{name}{path}"),
            headers: headers
                .iter()
                .map(|(header, value)| ((*header).to_owned(), (*value).to_owned()))
                .collect(),
            body: body.to_vec(),
        };
        self.send(&request, patience)
    }

    /// Invokes function `name` with a raw event (as the Lambda `Invoke` API does, e.g. an
    /// SQS batch), waiting up to `patience` for the first build; returns status and the
    /// function's response.
    pub fn invoke(
        &mut self, name: &str, payload: &serde_json::Value, patience: Duration,
    ) -> (u16, String) {
        let request = HttpRequest {
            method: "POST",
            path: format!("/2015-03-31/functions/{name}/invocations"),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: payload.to_string().into_bytes(),
        };
        self.send(&request, patience)
    }

    fn send(&mut self, request: &HttpRequest, patience: Duration) -> (u16, String) {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll cargo lambda") {
                panic!("cargo lambda watch exited ({status}):\n{}", self.log_tail());
            }
            // The first call to a function waits for its build: allow it the whole patience.
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(30));
            match http_request(self.port, request, wait) {
                Ok(answer) => return answer,
                // Not listening yet, or still building: try again until the deadline.
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(500))
                }
                Err(err) => panic!(
                    "no answer from {} {}: {err}\n{}",
                    request.method,
                    request.path,
                    self.log_tail()
                ),
            }
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for LambdaWatch {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let stopped = Command::new("kill").args(["-TERM", "--", &group]).status();
        if !stopped.is_ok_and(|s| s.success()) {
            eprintln!("could not signal process group {group}; killing cargo-lambda only");
            if let Err(err) = self.child.kill() {
                eprintln!("kill failed: {err}");
            }
        }
        if let Err(err) = self.child.wait() {
            eprintln!("wait failed: {err}");
        }
    }
}

/// One HTTP/1.1 request for [`http_request`].
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `GET`, `POST`, …
    pub method: &'static str,
    /// Path and query.
    pub path: String,
    /// Extra headers (`Host`, `Connection` and `Content-Length` are added).
    pub headers: Vec<(String, String)>,
    /// Body bytes (may be empty).
    pub body: Vec<u8>,
}

/// A minimal HTTP/1.1 GET on 127.0.0.1; `Err` until something answers with a status line.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let request = HttpRequest {
        method: "GET",
        path: path.to_owned(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    http_request(port, &request, Duration::from_secs(300))
}

/// A minimal HTTP/1.1 request on 127.0.0.1, waiting up to `read_timeout` for the answer;
/// `Err` until something answers with a status line.
pub fn http_request(
    port: u16, request: &HttpRequest, read_timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(read_timeout))?;
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        request.method,
        request.path,
        request.body.len()
    );
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(&request.body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {head:?}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// Hostile jobs for a paired node, each of which must be deleted without running: each would
/// create its marker file in `dir` if it ran (`touch`, so give the node a policy that allows
/// `touch`, and send [`control_job`] alongside to show such a job does run). Returned as
/// `(what, queue message body, marker)`:
/// - a forged job (a signature not made with the node's key);
/// - an expired job (signed with the node's key, deadline passed);
/// - a job for another node (signed with this node's key);
/// - a job whose grant approves another command (both signed with the node's key: a grant
///   can only ever approve the command it was made for).
pub fn hostile_jobs(node_id: &str, node_secret: &str, dir: &Path) -> Vec<CraftedJob> {
    crafted_jobs(node_id, node_secret, dir).1
}

/// A well-formed job signed with the node's key that creates `dir/control.marker`: the
/// hostile jobs' twin, which does run. Returned as `(queue message body, marker)`.
pub fn control_job(node_id: &str, node_secret: &str, dir: &Path) -> (String, PathBuf) {
    crafted_jobs(node_id, node_secret, dir).0
}

/// A well-formed job signed with the node's key for a sandboxed session: it touches
/// `/workspace/jailed.marker`, and only where that fails (on a bare host, never in a jail)
/// `dir/bare.marker`. Returned as `(queue message body, the bare-host marker)`.
pub fn sandbox_job(node_id: &str, node_secret: &str, dir: &Path) -> (String, PathBuf) {
    use clawless_exec::node::wire::{Envelope, JobSandbox, NodeMessage};
    let ((control, _), _) = crafted_jobs(node_id, node_secret, dir);
    let key = clawless_exec::node::wire::signing_key(&clawless_exec::node::wire::secret_hash(
        node_secret,
    ));
    let Ok(NodeMessage::Job(mut job)) =
        Envelope::parse(&control).and_then(|envelope| envelope.open::<NodeMessage>(&key))
    else {
        panic!("the control job opens");
    };
    let bare = dir.join("bare.marker");
    let command = format!("touch /workspace/jailed.marker || touch {}", bare.display());
    job.job_id = format!("sandboxed-{}", job.issued_at_ms);
    job.nonce = format!("nonce-sandboxed-{}", job.issued_at_ms);
    job.argv = vec!["/bin/sh".to_owned(), "-lc".to_owned(), command.clone()];
    job.raw_command = command;
    job.session_key = "agent:main:generic:group:family".to_owned();
    job.sandbox = Some(JobSandbox::new("agent-main-generic-group-family-00000000"));
    let body = Envelope::seal(&NodeMessage::Job(job), &key)
        .expect("a job serializes")
        .to_json();
    (body, bare)
}

/// `(what, queue message body, marker)`.
pub type CraftedJob = (String, String, PathBuf);

fn crafted_jobs(
    node_id: &str, node_secret: &str, dir: &Path,
) -> ((String, PathBuf), Vec<CraftedJob>) {
    use clawless_exec::node::wire::{
        Envelope, ExecJob, Grant, GrantDecision, NodeMessage, SignedGrant, command_binding,
        secret_hash, signing_key,
    };
    let key = signing_key(&secret_hash(node_secret));
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("milliseconds fit u64");
    let job = |name: &str, marker: &Path| ExecJob {
        job_id: format!("hostile-{name}"),
        attempt: 0,
        node_id: node_id.to_owned(),
        agent_id: "main".to_owned(),
        session_key: "agent:main:main".to_owned(),
        call_id: format!("call-{name}"),
        argv: vec![
            "/bin/sh".to_owned(),
            "-lc".to_owned(),
            format!("touch {}", marker.display()),
        ],
        raw_command: format!("touch {}", marker.display()),
        cwd: None,
        env: Default::default(),
        timeout_ms: 5_000,
        deadline_ms: now + 600_000,
        issued_at_ms: now,
        nonce: format!("nonce-{name}-{now}"),
        grant: None,
        sandbox: None,
        yield_ms: None,
        pty: false,
    };
    let seal = |job: ExecJob, key: &[u8]| {
        Envelope::seal(&NodeMessage::Job(job), key)
            .expect("a job serializes")
            .to_json()
    };
    let mut hostile = Vec::new();
    let marker = dir.join("control.marker");
    let control = (seal(job("control", &marker), &key), marker);

    let marker = dir.join("forged.marker");
    hostile.push((
        "forged".to_owned(),
        seal(job("forged", &marker), b"not the node's key"),
        marker,
    ));

    let marker = dir.join("expired.marker");
    let mut expired = job("expired", &marker);
    expired.issued_at_ms = now - 120_000;
    expired.deadline_ms = now - 60_000;
    hostile.push(("expired".to_owned(), seal(expired, &key), marker));

    let marker = dir.join("other-node.marker");
    let mut elsewhere = job("other-node", &marker);
    elsewhere.node_id = format!("{node_id}x");
    hostile.push(("for another node".to_owned(), seal(elsewhere, &key), marker));

    let marker = dir.join("regranted.marker");
    let mut regranted = job("regranted", &marker);
    regranted.attempt = 1;
    let approved_argv = ["/bin/sh".to_owned(), "-lc".to_owned(), "ls /".to_owned()];
    let grant = Grant {
        job_id: regranted.job_id.clone(),
        binding: command_binding(&approved_argv, None, &Default::default()),
        decision: GrantDecision::AllowOnce,
        approved_by: "owner".to_owned(),
        expires_at_ms: now + 600_000,
    };
    regranted.grant = Some(SignedGrant::seal(&grant, &key).expect("a grant serializes"));
    hostile.push((
        "a grant for another command".to_owned(),
        seal(regranted, &key),
        marker,
    ));
    (control, hostile)
}

/// The SQS event an event source mapping would deliver for `message` from `queue_url`.
pub fn sqs_event(message: &aws_sdk_sqs::types::Message, queue_url: &str) -> serde_json::Value {
    let mut attributes = serde_json::Map::new();
    for (name, value) in message.attributes().into_iter().flatten() {
        attributes.insert(name.as_str().to_owned(), serde_json::json!(value));
    }
    let queue_name = queue_url.rsplit('/').next().unwrap_or_default();
    serde_json::json!({
        "Records": [{
            "messageId": message.message_id(),
            "receiptHandle": message.receipt_handle(),
            "body": message.body(),
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": message.md5_of_body(),
            "eventSource": "aws:sqs",
            "eventSourceARN": format!("arn:aws:sqs:us-east-1:123456789012:{queue_name}"),
            "awsRegion": "us-east-1"
        }]
    })
}

/// Plays an event source mapping once: hands what is on `queue_url` to `function` under
/// `watch`, one message a batch, and deletes each one the function did not report failed
/// (it asserts none is). Returns how many it handed over. Call from a multi-threaded tokio
/// runtime (the watch's HTTP calls block).
pub async fn pump_queue(
    watch: &mut LambdaWatch, sqs: &aws_sdk_sqs::Client, function: &str, queue_url: &str,
    patience: Duration,
) -> usize {
    let received = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(30)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive from the queue");
    let mut handed = 0;
    for message in received.messages() {
        let event = sqs_event(message, queue_url);
        let (status, answer) =
            tokio::task::block_in_place(|| watch.invoke(function, &event, patience));
        assert_eq!(status, 200, "{function}: {answer}");
        let answer: serde_json::Value =
            serde_json::from_str(&answer).expect("the function answers JSON");
        assert_eq!(
            answer["batchItemFailures"],
            serde_json::json!([]),
            "{function}: {answer}"
        );
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(message.receipt_handle().unwrap_or_default())
            .send()
            .await
            .expect("delete from the queue");
        handed += 1;
    }
    handed
}
