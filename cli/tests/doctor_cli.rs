//! `clawless doctor` run as the real binary: against moto (buckets, table, queues, SSM
//! parameters, the config object in S3) and a local stand-in for the Telegram, Slack and
//! Discord APIs (the channels' `apiBaseUrl`s point at it), and `--local` against a state
//! directory.
//!
//! Covered: a complete deployment passes every check with exit status 0; a missing queue,
//! an unresolvable secret, an unregistered Telegram webhook, a refused Slack token and a
//! Discord application without `/ask` each FAIL with a fix, and the exit status is non-zero;
//! a config error names its file, line and column; a Telegram webhook pointing at another
//! deployment fails when `--api-url` is given.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_ssm::types::ParameterType;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_standard_queue, fresh_table,
    moto_endpoint, moto_sdk_config, s3_client, sqs_client,
};
use clawless_local::sqlite::SqliteDb;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const BOT_TOKEN: &str = "123456:ABC-def_ghi";
const SLACK_TOKEN: &str = "xoxb-good";
const DISCORD_TOKEN: &str = "discord-bot-token";
const APPLICATION_ID: &str = "123456789012345678";
const API_URL: &str = "https://api.example.test";

/// What the stand-in platforms answer.
struct Platforms {
    telegram_webhook: Mutex<String>,
    discord_commands: Mutex<Vec<&'static str>>,
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn telegram_webhook_info(
    State(platforms): State<Arc<Platforms>>, UrlPath(bot): UrlPath<String>,
) -> Response {
    if bot != format!("bot{BOT_TOKEN}") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "description": "Unauthorized"})),
        )
            .into_response();
    }
    let url = platforms.telegram_webhook.lock().unwrap().clone();
    Json(json!({"ok": true, "result": {"url": url, "pending_update_count": 0}})).into_response()
}

async fn slack_auth_test(headers: HeaderMap) -> Json<Value> {
    if header(&headers, "authorization") == format!("Bearer {SLACK_TOKEN}") {
        Json(json!({"ok": true, "team": "Acme", "user_id": "UBOT1"}))
    } else {
        Json(json!({"ok": false, "error": "invalid_auth"}))
    }
}

async fn discord_commands(
    State(platforms): State<Arc<Platforms>>, UrlPath(application): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    if application != APPLICATION_ID
        || header(&headers, "authorization") != format!("Bot {DISCORD_TOKEN}")
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "401: Unauthorized"})),
        )
            .into_response();
    }
    let commands: Vec<Value> = platforms
        .discord_commands
        .lock()
        .unwrap()
        .iter()
        .map(|name| json!({"id": "1", "name": name, "type": 1}))
        .collect();
    Json(Value::Array(commands)).into_response()
}

/// Starts the stand-in platforms; returns their base URL.
async fn start_platforms(webhook: &str, commands: Vec<&'static str>) -> String {
    let platforms = Arc::new(Platforms {
        telegram_webhook: Mutex::new(webhook.to_owned()),
        discord_commands: Mutex::new(commands),
    });
    let app = Router::new()
        .route(
            "/telegram/{bot}/getWebhookInfo",
            post(telegram_webhook_info),
        )
        .route("/slack/auth.test", post(slack_auth_test))
        .route(
            "/discord/applications/{application}/commands",
            get(discord_commands),
        )
        .with_state(platforms);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn discord_public_key() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    hex::encode(key.verifying_key().to_bytes())
}

/// `clawless.yaml` with all three platform channels pointed at `platforms`, and `secrets`.
fn config(platforms: &str, secrets: &str, telegram_token: &str) -> String {
    format!(
        r#"secrets:
{secrets}
channels:
  telegram:
    {telegram_token}
    secretToken: webhook-secret
    apiBaseUrl: {platforms}/telegram
  slack:
    botToken: {SLACK_TOKEN}
    signingSecret: signing-secret
    apiBaseUrl: {platforms}/slack
  discord:
    applicationId: "{APPLICATION_ID}"
    publicKey: {public_key}
    botToken: {DISCORD_TOKEN}
    apiBaseUrl: {platforms}/discord
"#,
        public_key = discord_public_key()
    )
}

async fn doctor(cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let cwd = cwd.to_owned();
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect();
    // The stand-in platforms run on this runtime, so the binary runs off it.
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(BIN);
        command
            .arg("doctor")
            .args(&args)
            .current_dir(&cwd)
            .env_clear()
            .env("HOME", &cwd)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("CLAWLESS_S3_FORCE_PATH_STYLE", "true");
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().expect("run clawless doctor")
    })
    .await
    .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_lines(report: &str, expected: &[&str]) {
    for line in expected {
        assert!(report.contains(line), "missing {line:?} in:\n{report}");
    }
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{name}-{}-{nanos}", std::process::id())
}

/// A deployment on moto: both buckets, the table (TTL on), the turn, sub-agent turn and timer
/// queues.
struct Deployment {
    bucket: String,
    blob_bucket: String,
    table: String,
    turn_queue: String,
    subagent_turn_queue: String,
    timer_queue: String,
    s3: aws_sdk_s3::Client,
    ssm: aws_sdk_ssm::Client,
}

async fn deployment() -> Deployment {
    let config = moto_sdk_config().await;
    let s3 = s3_client(&config);
    let sqs = sqs_client(&config);
    Deployment {
        bucket: fresh_bucket(&s3, "deploy").await,
        blob_bucket: fresh_bucket(&s3, "blobs").await,
        table: fresh_table(&dynamodb_client(&config)).await,
        turn_queue: fresh_fifo_queue(&sqs).await,
        subagent_turn_queue: fresh_fifo_queue(&sqs).await,
        timer_queue: fresh_standard_queue(&sqs, Duration::from_secs(30)).await,
        s3,
        ssm: aws_sdk_ssm::Client::new(&config),
    }
}

impl Deployment {
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", moto_endpoint()),
            ("CLAWLESS_BUCKET", self.bucket.clone()),
            ("CLAWLESS_BLOB_BUCKET", self.blob_bucket.clone()),
            ("CLAWLESS_TABLE", self.table.clone()),
            ("CLAWLESS_TURN_QUEUE_URL", self.turn_queue.clone()),
            (
                "CLAWLESS_SUBAGENT_TURN_QUEUE_URL",
                self.subagent_turn_queue.clone(),
            ),
            ("CLAWLESS_TIMER_QUEUE_URL", self.timer_queue.clone()),
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_deployment_passes_every_check() {
    // GIVEN a deployment whose config lives in S3, with the Telegram bot token in SSM, the
    // webhook registered at this deployment and /ask registered on Discord
    let deployment = deployment().await;
    let parameter = format!("/clawless/{}", unique("telegram"));
    deployment
        .ssm
        .put_parameter()
        .name(&parameter)
        .value(BOT_TOKEN)
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    let platforms = start_platforms(
        &format!("{API_URL}/webhook/telegram"),
        vec!["ask", "weather"],
    )
    .await;
    let yaml = config(
        &platforms,
        &format!("  TELEGRAM_BOT_TOKEN: {{ssm: {parameter}}}"),
        "botTokenEnv: TELEGRAM_BOT_TOKEN",
    );
    deployment
        .s3
        .put_object()
        .bucket(&deployment.bucket)
        .key("clawless.yaml")
        .body(yaml.into_bytes().into())
        .send()
        .await
        .unwrap();
    let mut env = deployment.env();
    env.push((
        "CLAWLESS_CONFIG",
        format!("s3://{}/clawless.yaml", deployment.bucket),
    ));
    env.push(("CLAWLESS_URL", API_URL.to_owned()));
    let cwd = tempfile::tempdir().unwrap();

    // WHEN the operator runs the doctor with the functions' environment
    let output = doctor(cwd.path(), &[], &env).await;

    // THEN every check is ok and the exit status is 0
    let report = text(&output);
    assert!(output.status.success(), "{report}");
    assert!(!report.contains("FAIL"), "{report}");
    assert_lines(
        &report,
        &[
            &format!(
                "ok    config s3://{}/clawless.yaml parses",
                deployment.bucket
            ),
            &format!("ok    skills bucket {} is reachable", deployment.bucket),
            &format!("ok    blob bucket {} is reachable", deployment.blob_bucket),
            &format!("ok    table {} exists", deployment.table),
            &format!(
                "ok    table {} expires items by TTL on expires_at",
                deployment.table
            ),
            &format!("ok    turn queue {} is reachable", deployment.turn_queue),
            &format!("ok    timer queue {} is reachable", deployment.timer_queue),
            &format!(
                "ok    sub-agent turn queue {} is reachable",
                deployment.subagent_turn_queue
            ),
            "ok    secret TELEGRAM_BOT_TOKEN resolves",
            &format!("ok    telegram webhook registered at {API_URL}/webhook/telegram"),
            "ok    slack bot token accepted (team Acme, bot user UBOT1)",
            "ok    discord /ask is registered (2 commands)",
            "all checks passed",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_pieces_each_fail_with_a_fix_and_a_non_zero_exit() {
    // GIVEN a deployment whose turn queue does not exist, whose config names a secret that is
    // not in SSM, whose bot has no webhook, whose Slack token is refused and whose Discord
    // application lacks /ask
    let deployment = deployment().await;
    let platforms = start_platforms("", vec!["weather"]).await;
    let missing = format!("/clawless/{}", unique("missing"));
    let yaml = config(
        &platforms,
        &format!("  OPENAI_API_KEY: {{ssm: {missing}}}"),
        &format!("botToken: \"{BOT_TOKEN}\""),
    )
    .replace(SLACK_TOKEN, "xoxb-revoked");
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("deploy.yaml"), yaml).unwrap();
    let missing_queue = format!("{}/123456789012/{}.fifo", moto_endpoint(), unique("gone"));
    let mut env = deployment.env();
    env.retain(|(name, _)| *name != "CLAWLESS_TURN_QUEUE_URL");

    // WHEN the doctor runs with flags in place of some variables
    let output = doctor(
        cwd.path(),
        &[
            "--config",
            "deploy.yaml",
            "--turn-queue-url",
            &missing_queue,
            "--api-url",
            API_URL,
        ],
        &env,
    )
    .await;

    // THEN each missing piece is one FAIL line with its fix, the rest ok, exit non-zero
    let report = text(&output);
    assert!(!output.status.success(), "{report}");
    assert_lines(
        &report,
        &[
            "ok    config deploy.yaml parses",
            &format!("ok    timer queue {} is reachable", deployment.timer_queue),
            &format!("FAIL  turn queue {missing_queue}: "),
            "fix: create it (sam deploy) or set the URL from the stack outputs",
            &format!("FAIL  secrets.OPENAI_API_KEY: SSM parameter {missing}"),
            &format!("fix: aws ssm put-parameter --name {missing} --type SecureString"),
            "FAIL  telegram: no webhook is registered for the bot",
            &format!("fix: clawless channels telegram set-webhook {API_URL}/webhook/telegram"),
            "FAIL  Slack auth.test: HTTP 200: invalid_auth",
            "FAIL  discord: /ask is not registered for the application",
            "fix: clawless channels discord register-commands",
            "5 check(s) failed",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_doctor_checks_the_state_and_a_webhook_pointing_elsewhere() {
    // GIVEN a local state directory and a bot whose webhook points at an old deployment
    let cwd = tempfile::tempdir().unwrap();
    let state = cwd.path().join(".clawless");
    std::fs::create_dir_all(&state).unwrap();
    SqliteDb::open(state.join("clawless.db")).unwrap();
    let platforms = start_platforms("https://old.example/webhook/telegram", vec!["ask"]).await;
    let yaml = config(&platforms, "  {}", &format!("botToken: \"{BOT_TOKEN}\""))
        .replace("secrets:\n  {}\n", "");
    std::fs::write(cwd.path().join("clawless.yaml"), yaml).unwrap();

    // WHEN the doctor checks local mode for this deployment's URL
    let output = doctor(cwd.path(), &["--local", "--api-url", API_URL], &[]).await;

    // THEN the state is ok and the webhook fails with the command that fixes it
    let report = text(&output);
    assert!(!output.status.success(), "{report}");
    assert_lines(
        &report,
        &[
            "ok    config clawless.yaml parses",
            "ok    local database .clawless/clawless.db opens (0 sessions)",
            "FAIL  telegram: the webhook points at https://old.example/webhook/telegram, not this deployment",
            &format!("fix: clawless channels telegram set-webhook {API_URL}/webhook/telegram"),
            "1 check(s) failed",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_error_names_its_file_line_and_column() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        cwd.path().join("clawless.yaml"),
        "channels:\n  telegram:\n    requireMention: maybe\n",
    )
    .unwrap();
    let output = doctor(cwd.path(), &["--local"], &[]).await;
    let report = text(&output);
    assert!(!output.status.success(), "{report}");
    assert_lines(
        &report,
        &[
            "FAIL  config: invalid config clawless.yaml: clawless.yaml:3:",
            "channels.telegram.requireMention",
            "fix: correct the file at the position shown",
            "FAIL  local database .clawless/clawless.db does not exist",
            "fix: start `clawless local` once",
        ],
    );
}
