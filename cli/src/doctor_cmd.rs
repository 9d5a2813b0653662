//! `clawless doctor`: checks a deployment the way its functions will meet it and says what to
//! fix. It reads `clawless.yaml` with the functions' loader and the functions' environment
//! variables (each also a flag), then checks one thing per line: the configuration, the
//! buckets, the table and its TTL, the queues, every `secrets:` entry, and each configured
//! channel's registration on its platform. `--local` checks `clawless local`'s state
//! directory instead of AWS. Any `FAIL` makes the exit status non-zero.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use clawless_aws::dynamo::EXPIRES_AT;
use clawless_channels::probe::{discord_command_names, slack_auth_test, telegram_webhook_info};
use clawless_core::session::SessionLister;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::aws_app::{
    BLOB_BUCKET_ENV, SUBAGENT_TURN_QUEUE_ENV, TABLE_ENV, TIMER_QUEUE_ENV, TURN_QUEUE_ENV,
};
use clawless_runtime::config::{BUCKET_ENV, CONFIG_ENV, bucket_layout_config};
use clawless_runtime::secrets::{SecretClients, fetch_secrets};
use clawless_runtime::{ClawlessConfig, StoreFactory};

/// `clawless doctor` options. Each AWS name defaults to the environment variable the
/// functions read, so a shell with the stack's variables exported needs no flags.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// clawless.yaml: a path or s3:// URI (default: ./clawless.yaml, else the bucket layout
    /// of --bucket).
    #[arg(long, env = CONFIG_ENV)]
    config: Option<String>,
    /// The deployment bucket (skills, workspaces).
    #[arg(long, env = BUCKET_ENV)]
    bucket: Option<String>,
    /// The bucket of offloaded transcript content.
    #[arg(long, env = BLOB_BUCKET_ENV)]
    blob_bucket: Option<String>,
    /// The DynamoDB table (sessions, inbox, nodes, jobs).
    #[arg(long, env = TABLE_ENV)]
    table: Option<String>,
    /// The SQS FIFO turn queue's URL.
    #[arg(long, env = TURN_QUEUE_ENV)]
    turn_queue_url: Option<String>,
    /// The SQS timer queue's URL.
    #[arg(long, env = TIMER_QUEUE_ENV)]
    timer_queue_url: Option<String>,
    /// The SQS FIFO queue of sub-agent sessions' turns (stack output `SubagentTurnQueueUrl`).
    #[arg(long, env = SUBAGENT_TURN_QUEUE_ENV)]
    subagent_turn_queue_url: Option<String>,
    /// The deployment's HTTP API base URL (stack output `ApiUrl`): Telegram's webhook must be
    /// <api-url>/webhook/telegram.
    #[arg(long, env = "CLAWLESS_URL")]
    api_url: Option<String>,
    /// Check `clawless local`'s state directory instead of AWS.
    #[arg(long)]
    local: bool,
    /// With --local: the state directory.
    #[arg(long, default_value = ".clawless")]
    state_dir: PathBuf,
}

/// The checks' lines and whether any failed.
#[derive(Debug, Default)]
struct Report {
    failures: usize,
}

impl Report {
    fn ok(&mut self, what: &str) {
        println!("ok    {what}");
    }

    fn fail(&mut self, what: &str, hint: &str) {
        self.failures += 1;
        println!("FAIL  {what}");
        println!("      fix: {hint}");
    }

    fn skip(&mut self, what: &str) {
        println!("skip  {what}");
    }
}

fn given(value: Option<&String>) -> Option<&str> {
    value.map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The service's error code and message, else the whole error chain.
fn describe<E>(err: &E) -> String
where
    E: aws_sdk_sqs::error::ProvideErrorMetadata + std::error::Error,
{
    match (err.code(), err.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => aws_sdk_sqs::error::DisplayErrorContext(err).to_string(),
    }
}

/// Runs `clawless doctor`.
pub(crate) async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report::default();
    let secrets = if args.local {
        let config = local_config(&args, &mut report);
        check_local_state(&args.state_dir, &mut report).await;
        match config {
            // `clawless local` fetches them with this machine's AWS configuration too.
            Some(config) if !config.secrets.is_empty() => {
                let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .load()
                    .await;
                let values = check_secrets(&shared, &config, &mut report).await;
                Some((config, values))
            }
            config => config.map(|config| (config, BTreeMap::new())),
        }
    } else {
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let s3 = clawless_runtime::aws_env::s3_client_from(&shared);
        let config = aws_config_check(&args, &s3, &mut report).await;
        check_bucket(
            &s3,
            "skills bucket",
            BUCKET_ENV,
            given(args.bucket.as_ref()),
            &mut report,
        )
        .await;
        check_bucket(
            &s3,
            "blob bucket",
            BLOB_BUCKET_ENV,
            given(args.blob_bucket.as_ref()),
            &mut report,
        )
        .await;
        check_table(&shared, given(args.table.as_ref()), &mut report).await;
        let sqs = aws_sdk_sqs::Client::new(&shared);
        check_queue(
            &sqs,
            "turn queue",
            TURN_QUEUE_ENV,
            given(args.turn_queue_url.as_ref()),
            true,
            &mut report,
        )
        .await;
        check_queue(
            &sqs,
            "timer queue",
            TIMER_QUEUE_ENV,
            given(args.timer_queue_url.as_ref()),
            false,
            &mut report,
        )
        .await;
        match given(args.subagent_turn_queue_url.as_ref()) {
            Some(url) => {
                check_queue(
                    &sqs,
                    "sub-agent turn queue",
                    SUBAGENT_TURN_QUEUE_ENV,
                    Some(url),
                    true,
                    &mut report,
                )
                .await;
            }
            // A deployment from before the queue: children share the turn queue, uncapped.
            None => report.skip(&format!(
                "sub-agent turn queue: not named ({SUBAGENT_TURN_QUEUE_ENV}); sub-agents share the turn queue, without the maxConcurrent cap"
            )),
        }
        match config {
            Some(config) => {
                let values = check_secrets(&shared, &config, &mut report).await;
                Some((config, values))
            }
            None => None,
        }
    };
    match secrets {
        Some((config, values)) => {
            check_channels(&config, &values, args.api_url.as_deref(), &mut report).await
        }
        None => report.skip("channels: the configuration did not load"),
    }
    if report.failures == 0 {
        println!("all checks passed");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{} check(s) failed", report.failures);
        Ok(ExitCode::FAILURE)
    }
}

fn local_config(args: &DoctorArgs, report: &mut Report) -> Option<ClawlessConfig> {
    let path = match given(args.config.as_ref()) {
        Some(path) => PathBuf::from(path),
        None if Path::new("clawless.yaml").is_file() => PathBuf::from("clawless.yaml"),
        None => {
            report.ok("config: no clawless.yaml, clawless local runs on its defaults");
            return Some(ClawlessConfig::default());
        }
    };
    match ClawlessConfig::from_file(&path) {
        Ok(config) => {
            report.ok(&format!("config {} parses", path.display()));
            Some(config)
        }
        Err(err) => {
            report.fail(
                &format!("config: {err}"),
                "correct the file at the position shown",
            );
            None
        }
    }
}

async fn check_local_state(state_dir: &Path, report: &mut Report) {
    let db_path = state_dir.join("clawless.db");
    if !db_path.is_file() {
        report.fail(
            &format!("local database {} does not exist", db_path.display()),
            "start `clawless local` once (it creates the state directory), or pass --state-dir",
        );
        return;
    }
    let listed = match SqliteDb::open(&db_path) {
        Ok(db) => SqliteSessionStore::new(db)
            .list_sessions()
            .await
            .map_err(|err| err.to_string()),
        Err(err) => Err(err.to_string()),
    };
    match listed {
        Ok(sessions) => report.ok(&format!(
            "local database {} opens ({} sessions)",
            db_path.display(),
            sessions.len()
        )),
        Err(err) => report.fail(
            &format!("local database {}: {err}", db_path.display()),
            "stop other programs holding it; if it is damaged, move the state directory aside",
        ),
    }
}

/// Loads the configuration as the functions do: `--config`/`$CLAWLESS_CONFIG` (path or
/// `s3://`), else `./clawless.yaml`, else the conventional layout of the bucket.
async fn aws_config_check(
    args: &DoctorArgs, s3: &aws_sdk_s3::Client, report: &mut Report,
) -> Option<ClawlessConfig> {
    let location = match (given(args.config.as_ref()), given(args.bucket.as_ref())) {
        (Some(location), _) => location.to_owned(),
        (None, _) if Path::new("clawless.yaml").is_file() => "clawless.yaml".to_owned(),
        (None, Some(bucket)) => {
            report.ok(&format!(
                "config: none given, the functions use the layout of s3://{bucket}"
            ));
            return Some(bucket_layout_config(bucket));
        }
        (None, None) => {
            report.fail(
                "config: no configuration",
                &format!("pass --config (a path or s3:// URI), or set {CONFIG_ENV} or {BUCKET_ENV} as the functions have them"),
            );
            return None;
        }
    };
    let stores = StoreFactory::with_s3_client(s3.clone());
    match ClawlessConfig::load(&location, &stores).await {
        Ok(config) => {
            report.ok(&format!("config {location} parses"));
            Some(config)
        }
        Err(err) => {
            report.fail(
                &format!("config: {err}"),
                "correct it at the position shown (and upload it again if it lives in S3)",
            );
            None
        }
    }
}

async fn check_bucket(
    s3: &aws_sdk_s3::Client, what: &str, env: &str, bucket: Option<&str>, report: &mut Report,
) {
    let Some(bucket) = bucket else {
        report.fail(
            &format!("{what}: not named"),
            &format!("set {env} (or the flag) to the stack's bucket"),
        );
        return;
    };
    match s3.head_bucket().bucket(bucket).send().await {
        Ok(_) => report.ok(&format!("{what} {bucket} is reachable")),
        Err(err) => report.fail(
            &format!("{what} {bucket}: {}", describe(&err)),
            "check the name against the stack outputs and that your credentials may read it",
        ),
    }
}

async fn check_table(shared: &aws_config::SdkConfig, table: Option<&str>, report: &mut Report) {
    let Some(table) = table else {
        report.fail(
            "table: not named",
            &format!("set {TABLE_ENV} (or --table) to the stack's table"),
        );
        return;
    };
    let client = aws_sdk_dynamodb::Client::new(shared);
    match client.describe_table().table_name(table).send().await {
        Ok(output) => {
            let status = output
                .table()
                .and_then(|t| t.table_status())
                .map_or_else(|| "unknown".to_owned(), |s| s.as_str().to_owned());
            report.ok(&format!("table {table} exists ({status})"));
        }
        Err(err) => {
            report.fail(
                &format!("table {table}: {}", describe(&err)),
                "deploy the stack (sam deploy) or set the name from its outputs",
            );
            return;
        }
    }
    match client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
    {
        Ok(output) => {
            let ttl = output.time_to_live_description();
            let status = ttl
                .and_then(|d| d.time_to_live_status())
                .map(|s| s.as_str().to_owned());
            let attribute = ttl.and_then(|d| d.attribute_name());
            if status.as_deref() == Some("ENABLED") && attribute == Some(EXPIRES_AT) {
                report.ok(&format!(
                    "table {table} expires items by TTL on {EXPIRES_AT}"
                ));
            } else {
                report.fail(
                    &format!(
                        "table {table}: TTL is {} on {}",
                        status.as_deref().unwrap_or("off"),
                        attribute.unwrap_or("no attribute")
                    ),
                    &format!("aws dynamodb update-time-to-live --table-name {table} --time-to-live-specification Enabled=true,AttributeName={EXPIRES_AT}"),
                );
            }
        }
        Err(err) => report.fail(
            &format!("table {table}: TTL unreadable: {}", describe(&err)),
            "allow dynamodb:DescribeTimeToLive to your credentials",
        ),
    }
}

async fn check_queue(
    sqs: &aws_sdk_sqs::Client, what: &str, env: &str, url: Option<&str>, fifo: bool,
    report: &mut Report,
) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let Some(url) = url else {
        report.fail(
            &format!("{what}: not named"),
            &format!("set {env} (or the flag) to the stack's queue URL"),
        );
        return;
    };
    let answer = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .attribute_names(QueueAttributeName::FifoQueue)
        .send()
        .await;
    match answer {
        Ok(output) => {
            let is_fifo = output
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::FifoQueue))
                .is_some_and(|value| value == "true");
            if fifo && !is_fifo {
                report.fail(
                    &format!("{what} {url} is not a FIFO queue"),
                    "the turn queue must be FIFO (ordered per session): point it at the stack's TurnQueue",
                );
            } else {
                report.ok(&format!("{what} {url} is reachable"));
            }
        }
        Err(err) => report.fail(
            &format!("{what} {url}: {}", describe(&err)),
            "create it (sam deploy) or set the URL from the stack outputs",
        ),
    }
}

/// Fetches each `secrets:` entry on its own, so every unresolvable one gets its line.
async fn check_secrets(
    shared: &aws_config::SdkConfig, config: &ClawlessConfig, report: &mut Report,
) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    if config.secrets.is_empty() {
        return values;
    }
    let clients = SecretClients::new(shared);
    for (name, source) in &config.secrets {
        let one = BTreeMap::from([(name.clone(), source.clone())]);
        match fetch_secrets(&one, &clients).await {
            Ok(fetched) => {
                if let Some(value) = fetched.get(name) {
                    values.insert(name.clone(), value.to_owned());
                }
                report.ok(&format!("secret {name} resolves"));
            }
            Err(err) => {
                let hint = match (&source.ssm, &source.secrets_manager) {
                    (Some(parameter), None) => format!(
                        "aws ssm put-parameter --name {parameter} --type SecureString --value …, or correct secrets.{name}.ssm"
                    ),
                    (None, Some(id)) => format!(
                        "aws secretsmanager create-secret --name {id} --secret-string …, or correct secrets.{name}"
                    ),
                    _ => format!("give secrets.{name} exactly one of ssm and secretsManager"),
                };
                report.fail(&err.to_string(), &hint);
            }
        }
    }
    values
}

async fn check_channels(
    config: &ClawlessConfig, secrets: &BTreeMap<String, String>, api_url: Option<&str>,
    report: &mut Report,
) {
    // As in the functions: a fetched secret first, then the environment.
    let lookup = |name: &str| {
        secrets
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|value| !value.trim().is_empty())
    };
    let http = match clawless_http::client_builder().build() {
        Ok(http) => http,
        Err(err) => {
            report.fail(
                &format!("channels: no HTTP client: {err}"),
                "check the TLS setup of this machine",
            );
            return;
        }
    };
    let channels = &config.channels;
    if channels.telegram.is_none() && channels.slack.is_none() && channels.discord.is_none() {
        report.skip("channels: no Telegram, Slack or Discord configured");
    }
    if let Some(telegram) = &channels.telegram {
        match telegram.resolve(&lookup) {
            Err(err) => report.fail(
                &err.to_string(),
                "set the value or export the variable it names",
            ),
            Ok(resolved) => {
                let expected = api_url
                    .map(|url| format!("{}/webhook/telegram", url.trim().trim_end_matches('/')));
                let set_hint = format!(
                    "clawless channels telegram set-webhook {}",
                    expected.as_deref().unwrap_or("<api-url>/webhook/telegram")
                );
                match telegram_webhook_info(&http, &resolved.api_base_url, &resolved.bot_token)
                    .await
                {
                    Err(err) => {
                        report.fail(&err.to_string(), "check channels.telegram.botToken(Env)")
                    }
                    Ok(info) if info.url.is_empty() => {
                        report.fail("telegram: no webhook is registered for the bot", &set_hint);
                    }
                    Ok(info)
                        if expected
                            .as_ref()
                            .is_some_and(|expected| *expected != info.url) =>
                    {
                        report.fail(
                            &format!(
                                "telegram: the webhook points at {}, not this deployment",
                                info.url
                            ),
                            &set_hint,
                        );
                    }
                    Ok(info) => {
                        let mut line = format!("telegram webhook registered at {}", info.url);
                        if let Some(error) = info.last_error_message {
                            line.push_str(&format!(" (last delivery error: {error})"));
                        }
                        report.ok(&line);
                    }
                }
            }
        }
    }
    if let Some(slack) = &channels.slack {
        match slack.resolve(&lookup) {
            Err(err) => report.fail(&err.to_string(), "set the value or export the variable it names"),
            Ok(resolved) => match slack_auth_test(&http, &resolved.api_base_url, &resolved.bot_token).await {
                Ok(identity) => report.ok(&format!(
                    "slack bot token accepted (team {}, bot user {})",
                    identity.team.as_deref().unwrap_or("?"),
                    identity.user_id.as_deref().unwrap_or("?")
                )),
                Err(err) => report.fail(
                    &err.to_string(),
                    "use the app's Bot User OAuth Token (xoxb-…) from OAuth & Permissions, and reinstall the app if it was revoked",
                ),
            },
        }
    }
    if let Some(discord) = &channels.discord {
        match discord.resolve(&lookup) {
            Err(err) => report.fail(&err.to_string(), "correct channels.discord"),
            Ok(resolved) => match &resolved.bot_token {
                None => report.skip("discord commands: no botToken(Env) to list them with"),
                Some(token) => match discord_command_names(
                    &http,
                    &resolved.api_base_url,
                    &resolved.application_id,
                    token,
                )
                .await
                {
                    Ok(names) if names.iter().any(|name| name == "ask") => {
                        report.ok(&format!(
                            "discord /ask is registered ({} commands)",
                            names.len()
                        ));
                    }
                    Ok(_) => report.fail(
                        "discord: /ask is not registered for the application",
                        "clawless channels discord register-commands",
                    ),
                    Err(err) => report.fail(
                        &err.to_string(),
                        "check channels.discord.applicationId and the bot token",
                    ),
                },
            },
        }
    }
}
