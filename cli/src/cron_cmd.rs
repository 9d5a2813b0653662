//! `clawless cron status|list|add|update|remove|run|runs|wake`: cron jobs for operators,
//! with OpenClaw's flags (spec `openclaw-automation.md` §2.12).
//!
//! Each command becomes one `cron` tool call (the tool's JSON arguments, read by
//! [`parse_cron_call`]) and runs in one of two places. By default it runs on the SQLite
//! database in `clawless local`'s state directory. A running `clawless local` polls the same
//! timers table and turn queue, so a job added here fires there, and `run` and `wake` are
//! picked up there. With `--url`, it goes to a deployed backend's `POST /cron/admin/call`,
//! with the admin token from `$CLAWLESS_ADMIN_TOKEN`. Both places answer with the tool's
//! JSON. `--json` prints that JSON, and otherwise this module renders it as text.
//!
//! Flags are checked here, before anything is opened, with OpenClaw's error sentences; what
//! the job itself may be (targets, payload kinds, delivery rules) is the service's to judge.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_automation::cron::schedule::{iso_millis, parse_absolute_time_in};
use clawless_automation::cron::tool::{CronCaller, parse_cron_call};
use clawless_automation::cron::validate::is_http_url;
use clawless_base::clock::{Clock, SystemClock};
use clawless_base::time::{TimeZone, parse_duration_ms, parse_time_zone, rfc3339_utc};
use clawless_local::sqlite::{SqliteDb, SqliteTurnQueue};
use clawless_runtime::cron_service::CronService;
use clawless_runtime::local_mode::local_cron_service;
use serde_json::{Map, Value, json};

use crate::admin_client::AdminClient;

/// `clawless cron` options.
#[derive(Debug, Args)]
pub(crate) struct CronArgs {
    /// State directory of `clawless local` (holds the jobs).
    #[arg(long, default_value = ".clawless", global = true)]
    state_dir: PathBuf,
    /// The configuration `clawless local` runs with (default: ./clawless.yaml when present):
    /// its time zone, `cron:` and heartbeat settings.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// A deployed backend's base URL: use its operator route (token from
    /// $CLAWLESS_ADMIN_TOKEN) instead of the local state.
    #[arg(long, global = true, env = "CLAWLESS_URL")]
    url: Option<String>,
    #[command(subcommand)]
    command: CronCommand,
}

#[derive(Debug, Subcommand)]
enum CronCommand {
    /// Whether jobs fire, how many there are, and when the next one is due.
    Status {
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// The jobs: id, name, schedule, next run (UTC), status; soonest first.
    List {
        /// Include disabled jobs.
        #[arg(long)]
        all: bool,
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Add a job: one schedule (--at, --every or --cron) and one payload (--system-event or
    /// --message).
    Add(Box<AddArgs>),
    /// Change a job: only the fields given are changed.
    #[command(alias = "edit")]
    Update(Box<UpdateArgs>),
    /// Delete a job.
    #[command(alias = "rm")]
    Remove {
        /// The job's id (`clawless cron list` shows it).
        id: String,
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Run a job now. The run is queued; its outcome shows in `clawless cron runs`.
    Run {
        /// The job's id.
        id: String,
        /// Run it only if it is due.
        #[arg(long)]
        due: bool,
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// A job's recent runs, newest first.
    Runs {
        /// The job's id.
        #[arg(required_unless_present = "id_flag")]
        id: Option<String>,
        /// The job's id (OpenClaw's spelling; same as the positional id).
        #[arg(long = "id", value_name = "ID", conflicts_with = "id")]
        id_flag: Option<String>,
        /// The most entries to show (the backend keeps up to 50 per page).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
    /// Put a system event into the default agent's main session.
    Wake {
        /// The event's text.
        #[arg(long)]
        text: String,
        /// `now` (wake the agent at once) or `next-heartbeat`.
        #[arg(long, default_value = "next-heartbeat")]
        mode: String,
        /// Print the JSON answer.
        #[arg(long)]
        json: bool,
    },
}

/// `clawless cron add` options.
#[derive(Debug, Args)]
struct AddArgs {
    /// The job's name.
    #[arg(long)]
    name: String,
    /// Create the job disabled.
    #[arg(long)]
    disabled: bool,
    #[command(flatten)]
    job: JobFlags,
}

/// `clawless cron update` options.
#[derive(Debug, Args)]
struct UpdateArgs {
    /// The job's id.
    id: String,
    /// A new name.
    #[arg(long)]
    name: Option<String>,
    /// Enable the job.
    #[arg(long)]
    enable: bool,
    /// Disable the job.
    #[arg(long)]
    disable: bool,
    #[command(flatten)]
    job: JobFlags,
}

/// The job fields `add` and `update` share.
#[derive(Debug, Default, Args)]
struct JobFlags {
    /// A longer description.
    #[arg(long)]
    description: Option<String>,
    /// The agent that owns the job.
    #[arg(long)]
    agent: Option<String>,
    /// Where it runs: main, isolated, current or session:<id> (default: main for
    /// --system-event, isolated for --message).
    #[arg(long)]
    session: Option<String>,
    /// The session a main job's event goes to.
    #[arg(long)]
    session_key: Option<String>,
    /// now or next-heartbeat (default now): whether a main job's event wakes the agent.
    #[arg(long)]
    wake: Option<String>,
    /// Run once: an ISO time (UTC unless it has an offset or --tz is given) or +<duration>
    /// from now (+20m, +1h30m).
    #[arg(long)]
    at: Option<String>,
    /// Run every <duration> (10m, 1h, 1d).
    #[arg(long)]
    every: Option<String>,
    /// Run on a cron expression (5 fields, or 6 with seconds).
    #[arg(long)]
    cron: Option<String>,
    /// IANA time zone of --cron, or of an --at time without an offset.
    #[arg(long)]
    tz: Option<String>,
    /// Spread a --cron job's runs over up to <duration> (30s, 5m).
    #[arg(long)]
    stagger: Option<String>,
    /// Run a --cron job exactly on its slots (no stagger).
    #[arg(long)]
    exact: bool,
    /// Payload: this text goes into the main session as a system event.
    #[arg(long)]
    system_event: Option<String>,
    /// Payload: a turn runs with this message (isolated, current or session jobs).
    #[arg(long)]
    message: Option<String>,
    /// The model of a --message job's turns.
    #[arg(long)]
    model: Option<String>,
    /// The thinking level of a --message job's turns.
    #[arg(long)]
    thinking: Option<String>,
    /// Seconds a --message job's turn may take.
    #[arg(long)]
    timeout_seconds: Option<u64>,
    /// Give a --message job's turns a light bootstrap context.
    #[arg(long)]
    light_context: bool,
    /// Tools a --message job's turns may use (comma- or space-separated).
    #[arg(long)]
    tools: Option<String>,
    /// Send the run's final text to a chat (the default for --message jobs).
    #[arg(long, alias = "deliver")]
    announce: bool,
    /// Send nothing.
    #[arg(long)]
    no_deliver: bool,
    /// The chat platform to announce to (default: the last chat).
    #[arg(long)]
    channel: Option<String>,
    /// The recipient on --channel (a chat id).
    #[arg(long)]
    to: Option<String>,
    /// The channel account to announce from.
    #[arg(long)]
    account: Option<String>,
    /// A failed delivery does not fail the run.
    #[arg(long)]
    best_effort_deliver: bool,
    /// POST the finished run as JSON to this http(s) URL instead of a chat.
    #[arg(long)]
    webhook: Option<String>,
    /// Delete a one-shot job after it succeeds (the default for --at).
    #[arg(long)]
    delete_after_run: bool,
    /// Keep a one-shot job after it succeeds.
    #[arg(long)]
    keep_after_run: bool,
    /// Print the JSON answer.
    #[arg(long)]
    json: bool,
}

/// `Choose exactly one payload: --system-event or --message`
const ONE_PAYLOAD: &str = "Choose exactly one payload: --system-event or --message";
/// `Choose at most one of --announce or --no-deliver`
const ONE_DELIVERY: &str = "Choose at most one of --announce or --no-deliver";
/// `--wake must be now or next-heartbeat`
const BAD_WAKE: &str = "--wake must be now or next-heartbeat";

/// A non-blank flag value, trimmed.
fn given(value: Option<&String>) -> Option<&str> {
    value
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
}

/// A duration with a unit (`20m`, `1h30m`), as OpenClaw's CLI reads one: bare numbers and
/// zero are refused.
fn duration_flag(text: &str) -> Option<u64> {
    let text = text.trim();
    if !text.chars().any(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    parse_duration_ms(text, 1).filter(|ms| *ms > 0)
}

/// `--at`: `+<duration>` (or a bare `<duration>`, as OpenClaw also accepts) from `now_ms`,
/// else an absolute time, offset-less ones read in `tz`.
fn parse_at(raw: &str, tz: &TimeZone, now_ms: u64) -> Option<String> {
    let raw = raw.trim();
    if let Some(duration) = raw.strip_prefix('+') {
        return duration_flag(duration).map(|ms| iso_millis(now_ms.saturating_add(ms)));
    }
    parse_absolute_time_in(raw, tz)
        .or_else(|| duration_flag(raw).map(|ms| now_ms.saturating_add(ms)))
        .map(iso_millis)
}

/// `--tz`/`--stagger`/`--exact` given alone to `update`: they change the job's current cron
/// schedule, which has to be read first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CronScheduleTweak {
    tz: Option<String>,
    stagger_ms: Option<u64>,
}

/// What the schedule flags ask for.
#[derive(Debug, PartialEq)]
enum ScheduleFlags {
    None,
    Schedule(Value),
    Tweak(CronScheduleTweak),
}

impl JobFlags {
    fn stagger_ms(&self) -> anyhow::Result<Option<u64>> {
        let stagger = given(self.stagger.as_ref());
        if stagger.is_some() && self.exact {
            bail!("Choose either --stagger or --exact, not both");
        }
        if self.exact {
            return Ok(Some(0));
        }
        stagger
            .map(|text| duration_flag(text).context("Invalid --stagger; use e.g. 30s, 1m, 5m"))
            .transpose()
    }

    /// The schedule flags, as OpenClaw's CLI reads them: at most one of --at, --every and
    /// --cron (`add` needs exactly one).
    fn schedule(&self, now_ms: u64) -> anyhow::Result<ScheduleFlags> {
        let (at, every, cron) = (
            given(self.at.as_ref()),
            given(self.every.as_ref()),
            given(self.cron.as_ref()),
        );
        let tz = given(self.tz.as_ref());
        let stagger_ms = self.stagger_ms()?;
        if [at, every, cron].iter().flatten().count() > 1 {
            bail!("Choose at most one schedule: --at, --every or --cron");
        }
        if tz.is_some() && every.is_some() {
            bail!("--tz is only valid with --cron or offset-less --at");
        }
        if stagger_ms.is_some() && (at.is_some() || every.is_some()) {
            bail!("--stagger/--exact are only valid for cron schedules");
        }
        if let Some(at) = at {
            let zone = match tz {
                Some(name) => parse_time_zone(name)?,
                None => TimeZone::UTC,
            };
            let at = parse_at(at, &zone, now_ms)
                .context("Invalid --at. Use an ISO timestamp or a duration like +20m.")?;
            return Ok(ScheduleFlags::Schedule(json!({"kind": "at", "at": at})));
        }
        if let Some(every) = every {
            let every_ms = duration_flag(every)
                .context("Invalid --every. Use a duration like 10m, 1h, or 1d.")?;
            return Ok(ScheduleFlags::Schedule(
                json!({"kind": "every", "everyMs": every_ms}),
            ));
        }
        if let Some(expr) = cron {
            let mut schedule = json!({"kind": "cron", "expr": expr});
            if let Some(tz) = tz {
                schedule["tz"] = tz.into();
            }
            if let Some(stagger_ms) = stagger_ms {
                schedule["staggerMs"] = stagger_ms.into();
            }
            return Ok(ScheduleFlags::Schedule(schedule));
        }
        if tz.is_some() || stagger_ms.is_some() {
            return Ok(ScheduleFlags::Tweak(CronScheduleTweak {
                tz: tz.map(str::to_owned),
                stagger_ms,
            }));
        }
        Ok(ScheduleFlags::None)
    }

    fn wake_mode(&self) -> anyhow::Result<Option<&'static str>> {
        match self.wake.as_deref().map(str::trim) {
            None => Ok(None),
            Some("now") => Ok(Some("now")),
            Some("next-heartbeat") => Ok(Some("next-heartbeat")),
            Some(_) => bail!(BAD_WAKE),
        }
    }

    fn tools(&self) -> Option<Vec<String>> {
        let tools: Vec<String> = self
            .tools
            .as_deref()?
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|tool| !tool.is_empty())
            .map(str::to_owned)
            .collect();
        (!tools.is_empty()).then_some(tools)
    }

    /// The agent-turn fields given (`--model`, `--thinking`, …), without the message.
    fn turn_fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        if let Some(model) = given(self.model.as_ref()) {
            fields.insert("model".into(), model.into());
        }
        if let Some(thinking) = given(self.thinking.as_ref()) {
            fields.insert("thinking".into(), thinking.into());
        }
        if let Some(seconds) = self.timeout_seconds {
            fields.insert("timeoutSeconds".into(), seconds.into());
        }
        if self.light_context {
            fields.insert("lightContext".into(), true.into());
        }
        if let Some(tools) = self.tools() {
            fields.insert("toolsAllow".into(), tools.into());
        }
        fields
    }

    /// The delivery the flags ask for, if any.
    fn delivery(&self) -> anyhow::Result<Option<Value>> {
        if self.announce && self.no_deliver {
            bail!(ONE_DELIVERY);
        }
        let chat_target = [&self.channel, &self.to, &self.account]
            .iter()
            .any(|value| given(value.as_ref()).is_some());
        if let Some(url) = self.webhook.as_deref() {
            if self.announce || self.no_deliver {
                bail!("Choose at most one of --announce, --no-deliver, or --webhook");
            }
            if chat_target {
                bail!("--webhook cannot be combined with chat delivery options.");
            }
            if !is_http_url(url) {
                bail!("--webhook must be a valid http(s) URL");
            }
            let mut delivery = json!({"mode": "webhook", "to": url.trim()});
            if self.best_effort_deliver {
                delivery["bestEffort"] = true.into();
            }
            return Ok(Some(delivery));
        }
        let mut delivery = Map::new();
        if self.no_deliver {
            delivery.insert("mode".into(), "none".into());
        } else if self.announce || chat_target {
            delivery.insert("mode".into(), "announce".into());
        }
        for (key, value) in [
            ("channel", &self.channel),
            ("to", &self.to),
            ("accountId", &self.account),
        ] {
            if let Some(value) = given(value.as_ref()) {
                delivery.insert(key.into(), value.into());
            }
        }
        if self.best_effort_deliver {
            delivery.insert("bestEffort".into(), true.into());
        }
        Ok((!delivery.is_empty()).then_some(Value::Object(delivery)))
    }

    fn delete_after_run(&self) -> anyhow::Result<Option<bool>> {
        match (self.delete_after_run, self.keep_after_run) {
            (true, true) => bail!("Choose --delete-after-run or --keep-after-run, not both"),
            (true, false) => Ok(Some(true)),
            (false, true) => Ok(Some(false)),
            (false, false) => Ok(None),
        }
    }

    /// The fields both `add` and `update` set the same way.
    fn common_fields(&self, job: &mut Map<String, Value>) -> anyhow::Result<()> {
        if let Some(description) = given(self.description.as_ref()) {
            job.insert("description".into(), description.into());
        }
        if let Some(agent) = given(self.agent.as_ref()) {
            job.insert("agentId".into(), agent.into());
        }
        if let Some(session) = given(self.session.as_ref()) {
            job.insert("sessionTarget".into(), session.into());
        }
        if let Some(key) = given(self.session_key.as_ref()) {
            job.insert("sessionKey".into(), key.into());
        }
        if let Some(delete) = self.delete_after_run()? {
            job.insert("deleteAfterRun".into(), delete.into());
        }
        if let Some(delivery) = self.delivery()? {
            job.insert("delivery".into(), delivery);
        }
        Ok(())
    }
}

/// The `cron` call of `clawless cron add`.
fn add_call(args: &AddArgs, now_ms: u64) -> anyhow::Result<Value> {
    let flags = &args.job;
    let schedule = match flags.schedule(now_ms)? {
        ScheduleFlags::Schedule(schedule) => schedule,
        ScheduleFlags::None | ScheduleFlags::Tweak(_) => {
            bail!("Choose exactly one schedule: --at, --every or --cron")
        }
    };
    let wake = flags.wake_mode()?.unwrap_or("now");
    let payload = match (
        given(flags.system_event.as_ref()),
        given(flags.message.as_ref()),
    ) {
        (Some(text), None) => {
            if !flags.turn_fields().is_empty() {
                bail!(
                    "--model, --thinking, --timeout-seconds, --light-context and --tools are for --message jobs"
                );
            }
            json!({"kind": "systemEvent", "text": text})
        }
        (None, Some(message)) => {
            let mut payload = flags.turn_fields();
            payload.insert("kind".into(), "agentTurn".into());
            payload.insert("message".into(), message.into());
            Value::Object(payload)
        }
        _ => bail!(ONE_PAYLOAD),
    };
    let name = args.name.trim();
    if name.is_empty() {
        bail!("Cron job name is required. Pass --name <name>.");
    }
    let mut job = Map::new();
    job.insert("name".into(), name.into());
    job.insert("enabled".into(), (!args.disabled).into());
    job.insert("schedule".into(), schedule);
    job.insert("wakeMode".into(), wake.into());
    job.insert("payload".into(), payload);
    flags.common_fields(&mut job)?;
    Ok(json!({"action": "add", "job": job}))
}

/// The `cron` call of `clawless cron update`, and the change to the job's current cron
/// schedule when only `--tz`, `--stagger` or `--exact` were given (the caller reads the job
/// and sets `patch.schedule`, see [`apply_tweak`]).
fn update_call(
    args: &UpdateArgs, now_ms: u64,
) -> anyhow::Result<(Value, Option<CronScheduleTweak>)> {
    let flags = &args.job;
    let mut patch = Map::new();
    if let Some(name) = given(args.name.as_ref()) {
        patch.insert("name".into(), name.into());
    }
    match (args.enable, args.disable) {
        (true, true) => bail!("Choose --enable or --disable, not both"),
        (true, false) => {
            patch.insert("enabled".into(), true.into());
        }
        (false, true) => {
            patch.insert("enabled".into(), false.into());
        }
        (false, false) => {}
    }
    let mut tweak = None;
    match flags.schedule(now_ms)? {
        ScheduleFlags::Schedule(schedule) => {
            patch.insert("schedule".into(), schedule);
        }
        ScheduleFlags::Tweak(change) => tweak = Some(change),
        ScheduleFlags::None => {}
    }
    if let Some(wake) = flags.wake_mode()? {
        patch.insert("wakeMode".into(), wake.into());
    }
    let turn = flags.turn_fields();
    let message = given(flags.message.as_ref());
    match given(flags.system_event.as_ref()) {
        Some(_) if message.is_some() || !turn.is_empty() => {
            bail!("Choose at most one payload change")
        }
        Some(text) => {
            patch.insert(
                "payload".into(),
                json!({"kind": "systemEvent", "text": text}),
            );
        }
        None if message.is_some() || !turn.is_empty() => {
            let mut payload = turn;
            payload.insert("kind".into(), "agentTurn".into());
            if let Some(message) = message {
                payload.insert("message".into(), message.into());
            }
            patch.insert("payload".into(), Value::Object(payload));
        }
        None => {}
    }
    flags.common_fields(&mut patch)?;
    if patch.is_empty() && tweak.is_none() {
        bail!("nothing to change: give the fields to set (see `clawless cron update --help`)");
    }
    Ok((
        json!({"action": "update", "jobId": args.id.trim(), "patch": patch}),
        tweak,
    ))
}

/// Sets `call.patch.schedule` to `current` (the job's schedule) with `tweak` applied.
fn apply_tweak(call: &mut Value, current: &Value, tweak: &CronScheduleTweak) -> anyhow::Result<()> {
    if current.get("kind").and_then(Value::as_str) != Some("cron") {
        bail!("Current job is not a cron schedule; use --cron to convert first");
    }
    let mut schedule = current.clone();
    if let Some(tz) = &tweak.tz {
        schedule["tz"] = tz.as_str().into();
    }
    if let Some(stagger_ms) = tweak.stagger_ms {
        schedule["staggerMs"] = stagger_ms.into();
    }
    call["patch"]["schedule"] = schedule;
    Ok(())
}

/// The `cron` call of `clawless cron wake`.
fn wake_call(text: &str, mode: &str) -> anyhow::Result<Value> {
    let mode = mode.trim();
    if !matches!(mode, "now" | "next-heartbeat") {
        bail!("--mode must be now or next-heartbeat");
    }
    Ok(json!({"action": "wake", "text": text, "mode": mode}))
}

/// Where the calls run.
enum Backend {
    /// The SQLite database of `clawless local`.
    Local(CronService),
    /// A deployed backend's operator route.
    Remote(AdminClient),
}

impl Backend {
    /// The backend `args` name. Only `add` may create the local database: a job added before
    /// `clawless local` first starts is armed by its start.
    fn open(args: &CronArgs, creating: bool) -> anyhow::Result<Self> {
        if let Some(url) = args
            .url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
        {
            return Ok(Self::Remote(AdminClient::from_env(url)?));
        }
        let db_path = args.state_dir.join("clawless.db");
        if !db_path.is_file() {
            if !creating {
                bail!(
                    "no local cron jobs at {}: start `clawless local` once, pass --state-dir, or --url for a deployment",
                    db_path.display()
                );
            }
            std::fs::create_dir_all(&args.state_dir)
                .with_context(|| format!("creating {}", args.state_dir.display()))?;
        }
        let config = crate::local_cmd::read_config(args.config.as_deref())?;
        let db = SqliteDb::open(&db_path).context("opening the local database")?;
        Ok(Self::Local(local_cron_service(
            &db,
            &args.state_dir,
            Arc::new(SqliteTurnQueue::new(db.clone())),
            Arc::new(SystemClock),
            config,
        )))
    }

    /// Runs one `cron` call and returns its JSON answer.
    async fn call(&self, args: &Value) -> anyhow::Result<Value> {
        match self {
            Self::Local(cron) => {
                let action = parse_cron_call(args)?;
                Ok(cron.call(action, &CronCaller::default()).await?)
            }
            Self::Remote(client) => client.cron_call(args).await,
        }
    }
}

/// Runs `clawless cron …`.
pub(crate) async fn run(args: CronArgs) -> anyhow::Result<ExitCode> {
    let now_ms = SystemClock.now_ms();
    match &args.command {
        CronCommand::Status { json } => {
            let answer = Backend::open(&args, false)?
                .call(&json!({"action": "status"}))
                .await?;
            print(&answer, *json, || render_status(&answer, now_ms));
        }
        CronCommand::List { all, json } => {
            let answer = Backend::open(&args, false)?
                .call(&json!({"action": "list", "includeDisabled": all}))
                .await?;
            print(&answer, *json, || render_list(&answer, now_ms));
        }
        CronCommand::Add(add) => {
            let call = add_call(add, now_ms)?;
            let job = Backend::open(&args, true)?.call(&call).await?;
            print(&job, add.job.json, || render_job("Added", &job, now_ms));
        }
        CronCommand::Update(update) => {
            let (mut call, tweak) = update_call(update, now_ms)?;
            let backend = Backend::open(&args, false)?;
            if let Some(tweak) = tweak {
                let current = find_job(&backend, update.id.trim()).await?;
                apply_tweak(&mut call, &current["schedule"], &tweak)?;
            }
            let job = backend.call(&call).await?;
            print(&job, update.job.json, || {
                render_job("Updated", &job, now_ms)
            });
        }
        CronCommand::Remove { id, json } => {
            let answer = Backend::open(&args, false)?
                .call(&json!({"action": "remove", "jobId": id}))
                .await?;
            let removed = answer.get("removed").and_then(Value::as_bool) == Some(true);
            print(&answer, *json, || {
                if removed {
                    format!("Removed job {id}")
                } else {
                    format!("No job {id}: nothing removed")
                }
            });
            if !removed {
                return Ok(ExitCode::FAILURE);
            }
        }
        CronCommand::Run { id, due, json } => {
            let mode = if *due { "due" } else { "force" };
            let answer = Backend::open(&args, false)?
                .call(&json!({"action": "run", "jobId": id, "runMode": mode}))
                .await?;
            print(&answer, *json, || render_run(&answer, id));
        }
        CronCommand::Runs {
            id,
            id_flag,
            limit,
            json,
        } => {
            let Some(id) = id.as_deref().or(id_flag.as_deref()) else {
                bail!("give the job's id (`clawless cron runs <id>`)");
            };
            let mut answer = Backend::open(&args, false)?
                .call(&json!({"action": "runs", "jobId": id}))
                .await?;
            keep_newest(&mut answer, *limit);
            print(&answer, *json, || render_runs(&answer));
        }
        CronCommand::Wake { text, mode, json } => {
            let call = wake_call(text, mode)?;
            let answer = Backend::open(&args, false)?.call(&call).await?;
            print(&answer, *json, || {
                format!(
                    "Wake event queued for the main session (mode {})",
                    mode.trim()
                )
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The job `id` as `list` shows it (disabled ones too).
async fn find_job(backend: &Backend, id: &str) -> anyhow::Result<Value> {
    let page = backend
        .call(&json!({"action": "list", "includeDisabled": true}))
        .await?;
    page["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|job| job["id"] == id))
        .cloned()
        .with_context(|| format!("unknown cron job id: {id}"))
}

/// Cuts a `runs` page (newest first) to its first `limit` entries.
fn keep_newest(page: &mut Value, limit: usize) {
    if let Some(entries) = page.get_mut("entries").and_then(Value::as_array_mut)
        && entries.len() > limit
    {
        entries.truncate(limit);
        page["limit"] = limit.into();
        page["hasMore"] = true.into();
        page["nextOffset"] = limit.into();
    }
}

fn print(answer: &Value, as_json: bool, human: impl FnOnce() -> String) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(answer).unwrap_or_else(|_| answer.to_string())
        );
    } else {
        println!("{}", human().trim_end());
    }
}

/// `1h30m`, `45s`, `250ms`.
fn human_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if rest > 0 {
        out.push_str(&format!("{rest}ms"));
    }
    out
}

/// `2026-01-31T13:00:00Z (in 1h)`, `-` for none.
fn when(ms: Option<u64>, now_ms: u64) -> String {
    let Some(ms) = ms else {
        return "-".to_owned();
    };
    let relative = if ms >= now_ms {
        format!("in {}", human_duration(round_to_unit(ms - now_ms)))
    } else {
        format!("{} ago", human_duration(round_to_unit(now_ms - ms)))
    };
    format!("{} ({relative})", rfc3339_utc(ms))
}

/// A span rounded to whole seconds below a minute, to whole minutes above.
fn round_to_unit(ms: u64) -> u64 {
    let unit = if ms < 60_000 { 1_000 } else { 60_000 };
    (ms + unit / 2) / unit * unit
}

fn render_schedule(schedule: &Value) -> String {
    match schedule["kind"].as_str() {
        Some("at") => format!("at {}", schedule["at"].as_str().unwrap_or("?")),
        Some("every") => format!(
            "every {}",
            human_duration(schedule["everyMs"].as_u64().unwrap_or(0))
        ),
        Some("cron") => {
            let mut text = format!("cron {}", schedule["expr"].as_str().unwrap_or("?"));
            if let Some(tz) = schedule["tz"].as_str() {
                text.push_str(&format!(" @ {tz}"));
            }
            match schedule["staggerMs"].as_u64() {
                Some(0) => text.push_str(" (exact)"),
                Some(ms) => text.push_str(&format!(" (stagger {})", human_duration(ms))),
                None => {}
            }
            text
        }
        _ => "-".to_owned(),
    }
}

/// OpenClaw's status column: disabled, running, the last run's status, or idle.
fn job_status(job: &Value) -> String {
    if job["enabled"] == false {
        return "disabled".to_owned();
    }
    let state = &job["state"];
    if state["runningAtMs"].is_u64() {
        return "running".to_owned();
    }
    state["lastRunStatus"]
        .as_str()
        .or(state["lastStatus"].as_str())
        .unwrap_or("idle")
        .to_owned()
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(3)).collect();
    format!("{kept}...")
}

/// The array under `key` in a page the backend answered (empty when it is missing).
fn page_items<'a>(page: &'a Value, key: &str) -> &'a [Value] {
    page[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn render_list(page: &Value, now_ms: u64) -> String {
    let jobs = page_items(page, "jobs");
    if jobs.is_empty() {
        return "No cron jobs.".to_owned();
    }
    let mut out = format!(
        "{:<36}  {:<24}  {:<32}  {:<34}  {}\n",
        "ID", "NAME", "SCHEDULE", "NEXT RUN (UTC)", "STATUS"
    );
    for job in jobs {
        let next = if job["enabled"] == false {
            "-".to_owned()
        } else {
            when(job["state"]["nextRunAtMs"].as_u64(), now_ms)
        };
        out.push_str(&format!(
            "{:<36}  {:<24}  {:<32}  {:<34}  {}\n",
            job["id"].as_str().unwrap_or("?"),
            cut(job["name"].as_str().unwrap_or(""), 24),
            cut(&render_schedule(&job["schedule"]), 32),
            next,
            job_status(job),
        ));
    }
    if page["hasMore"] == true {
        out.push_str(&format!(
            "… {} jobs in all; only the first {} are shown\n",
            page["total"],
            jobs.len()
        ));
    }
    out
}

fn render_job(verb: &str, job: &Value, now_ms: u64) -> String {
    let next = if job["enabled"] == false {
        "disabled".to_owned()
    } else {
        format!(
            "next run {}",
            when(job["state"]["nextRunAtMs"].as_u64(), now_ms)
        )
    };
    format!(
        "{verb} job {} ({}): {}, {}, {next}",
        job["id"].as_str().unwrap_or("?"),
        job["name"].as_str().unwrap_or(""),
        render_schedule(&job["schedule"]),
        job["sessionTarget"].as_str().unwrap_or("?"),
    )
}

fn render_status(status: &Value, now_ms: u64) -> String {
    let enabled = if status["enabled"] == true {
        "enabled"
    } else {
        "disabled (cron.enabled: false): jobs are kept but do not fire"
    };
    let mut out = format!("cron: {enabled}\n");
    if let Some(store) = status["storePath"].as_str() {
        out.push_str(&format!("store: {store}\n"));
    }
    out.push_str(&format!("jobs: {}\n", status["jobs"]));
    out.push_str(&format!(
        "next wake: {}\n",
        when(status["nextWakeAtMs"].as_u64(), now_ms)
    ));
    out
}

fn render_run(answer: &Value, id: &str) -> String {
    if answer["enqueued"] == true {
        return format!(
            "Run {} queued; `clawless cron runs {id}` shows its outcome once it ends",
            answer["runId"].as_str().unwrap_or("?")
        );
    }
    format!(
        "Not run: {}",
        answer["reason"].as_str().unwrap_or("unknown reason")
    )
}

fn render_runs(page: &Value) -> String {
    let entries = page_items(page, "entries");
    if entries.is_empty() {
        return "No runs.".to_owned();
    }
    let mut out = String::new();
    for entry in entries {
        let duration = entry["durationMs"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), human_duration);
        let detail = entry["error"]
            .as_str()
            .or(entry["summary"].as_str())
            .unwrap_or("");
        let delivered = entry["deliveryStatus"].as_str().unwrap_or("-");
        out.push_str(&format!(
            "{}  {:<8}  {:>8}  delivery {:<13}  {}\n",
            entry["ts"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), rfc3339_utc),
            entry["status"].as_str().unwrap_or("-"),
            duration,
            delivered,
            cut(
                &detail.split_whitespace().collect::<Vec<_>>().join(" "),
                100
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// 2026-01-31T12:00:00Z.
    const NOW: u64 = 1_769_860_800_000;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: CronCommand,
    }

    fn parse(args: &[&str]) -> CronCommand {
        Cli::try_parse_from(std::iter::once("cron").chain(args.iter().copied()))
            .expect("valid flags")
            .command
    }

    fn add(args: &[&str]) -> Result<Value, String> {
        let mut full = vec!["add"];
        full.extend_from_slice(args);
        match parse(&full) {
            CronCommand::Add(add) => add_call(&add, NOW).map_err(|err| err.to_string()),
            other => panic!("not add: {other:?}"),
        }
    }

    fn update(args: &[&str]) -> Result<(Value, Option<CronScheduleTweak>), String> {
        let mut full = vec!["update"];
        full.extend_from_slice(args);
        match parse(&full) {
            CronCommand::Update(update) => update_call(&update, NOW).map_err(|err| err.to_string()),
            other => panic!("not update: {other:?}"),
        }
    }

    #[test]
    fn an_at_job_with_a_system_event_becomes_the_tools_add_call() {
        let call = add(&[
            "--name",
            "tea",
            "--at",
            "+20m",
            "--system-event",
            "Tea is ready.",
        ]);
        assert_eq!(
            call,
            Ok(json!({"action": "add", "job": {
                "name": "tea",
                "enabled": true,
                "schedule": {"kind": "at", "at": "2026-01-31T12:20:00.000Z"},
                "wakeMode": "now",
                "payload": {"kind": "systemEvent", "text": "Tea is ready."},
            }}))
        );
        // The call is one the tool itself accepts.
        parse_cron_call(&call.unwrap()).expect("the tool parses it");
    }

    #[test]
    fn at_takes_iso_times_in_utc_or_tz_and_durations() {
        let at = |args: &[&str]| {
            let mut full = vec!["--name", "n", "--system-event", "t"];
            full.extend_from_slice(args);
            add(&full).map(|call| call["job"]["schedule"]["at"].clone())
        };
        assert_eq!(
            at(&["--at", "2026-02-01T09:00:00"]),
            Ok(json!("2026-02-01T09:00:00.000Z"))
        );
        assert_eq!(
            at(&["--at", "2026-02-01T09:00:00", "--tz", "Europe/Berlin"]),
            Ok(json!("2026-02-01T08:00:00.000Z"))
        );
        assert_eq!(
            at(&["--at", "2026-02-01T09:00:00+02:00", "--tz", "Europe/Berlin"]),
            Ok(json!("2026-02-01T07:00:00.000Z"))
        );
        assert_eq!(
            at(&["--at", "+1h30m"]),
            Ok(json!("2026-01-31T13:30:00.000Z"))
        );
        assert_eq!(at(&["--at", "45s"]), Ok(json!("2026-01-31T12:00:45.000Z")));
        for bad in ["+20", "soon", "+-5m", "+0m"] {
            assert_eq!(
                at(&["--at", bad]),
                Err("Invalid --at. Use an ISO timestamp or a duration like +20m.".to_owned()),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_and_cron_schedules_map_to_their_fields() {
        let schedule = |args: &[&str]| {
            let mut full = vec!["--name", "n", "--message", "m"];
            full.extend_from_slice(args);
            add(&full).map(|call| call["job"]["schedule"].clone())
        };
        assert_eq!(
            schedule(&["--every", "1h30m"]),
            Ok(json!({"kind": "every", "everyMs": 5_400_000}))
        );
        assert_eq!(
            schedule(&["--cron", "0 7 * * *", "--tz", "Europe/Paris", "--exact"]),
            Ok(json!({"kind": "cron", "expr": "0 7 * * *", "tz": "Europe/Paris", "staggerMs": 0}))
        );
        assert_eq!(
            schedule(&["--cron", "0 * * * *", "--stagger", "2m"]),
            Ok(json!({"kind": "cron", "expr": "0 * * * *", "staggerMs": 120_000}))
        );
        assert_eq!(
            schedule(&["--every", "90"]),
            Err("Invalid --every. Use a duration like 10m, 1h, or 1d.".to_owned())
        );
        assert_eq!(
            schedule(&["--every", "1h", "--cron", "0 * * * *"]),
            Err("Choose at most one schedule: --at, --every or --cron".to_owned())
        );
        assert_eq!(
            schedule(&[]),
            Err("Choose exactly one schedule: --at, --every or --cron".to_owned())
        );
        assert_eq!(
            schedule(&["--every", "1h", "--tz", "UTC"]),
            Err("--tz is only valid with --cron or offset-less --at".to_owned())
        );
        assert_eq!(
            schedule(&["--at", "+1h", "--exact"]),
            Err("--stagger/--exact are only valid for cron schedules".to_owned())
        );
        assert_eq!(
            schedule(&["--cron", "0 * * * *", "--stagger", "1m", "--exact"]),
            Err("Choose either --stagger or --exact, not both".to_owned())
        );
    }

    #[test]
    fn a_message_job_carries_its_turn_and_delivery_flags() {
        let call = add(&[
            "--name",
            "digest",
            "--cron",
            "0 8 * * 1-5",
            "--message",
            "Summarize my inbox.",
            "--model",
            "anthropic/claude-sonnet-4-5",
            "--thinking",
            "low",
            "--timeout-seconds",
            "120",
            "--light-context",
            "--tools",
            "read, web_fetch",
            "--session",
            "session:digest",
            "--agent",
            "ops",
            "--description",
            "Weekday digest",
            "--wake",
            "next-heartbeat",
            "--keep-after-run",
            "--disabled",
            "--announce",
            "--channel",
            "telegram",
            "--to",
            "123",
            "--best-effort-deliver",
        ])
        .expect("valid");
        assert_eq!(
            call["job"],
            json!({
                "name": "digest",
                "enabled": false,
                "schedule": {"kind": "cron", "expr": "0 8 * * 1-5"},
                "wakeMode": "next-heartbeat",
                "payload": {
                    "kind": "agentTurn", "message": "Summarize my inbox.",
                    "model": "anthropic/claude-sonnet-4-5", "thinking": "low",
                    "timeoutSeconds": 120, "lightContext": true, "toolsAllow": ["read", "web_fetch"]
                },
                "description": "Weekday digest",
                "agentId": "ops",
                "sessionTarget": "session:digest",
                "deleteAfterRun": false,
                "delivery": {"mode": "announce", "channel": "telegram", "to": "123", "bestEffort": true},
            })
        );
        let daily = |extra: &[&str]| {
            let mut args = vec!["--name", "n", "--every", "1d", "--message", "m"];
            args.extend_from_slice(extra);
            add(&args)
        };
        let quiet = daily(&["--no-deliver"]).expect("valid");
        assert_eq!(quiet["job"]["delivery"], json!({"mode": "none"}));
        let hook = daily(&["--webhook", "https://example.com/hook"]).expect("valid");
        assert_eq!(
            hook["job"]["delivery"],
            json!({"mode": "webhook", "to": "https://example.com/hook"})
        );
    }

    #[test]
    fn openclaws_flag_errors_are_kept_word_for_word() {
        let base = ["--name", "n", "--every", "1h"];
        let with = |extra: &[&str]| {
            let mut full = base.to_vec();
            full.extend_from_slice(extra);
            add(&full)
        };
        assert_eq!(with(&[]), Err(ONE_PAYLOAD.to_owned()));
        assert_eq!(
            with(&["--system-event", "a", "--message", "b"]),
            Err(ONE_PAYLOAD.to_owned())
        );
        assert_eq!(with(&["--system-event", "  "]), Err(ONE_PAYLOAD.to_owned()));
        assert_eq!(
            with(&["--message", "m", "--announce", "--no-deliver"]),
            Err(ONE_DELIVERY.to_owned())
        );
        assert_eq!(
            with(&["--system-event", "t", "--wake", "later"]),
            Err(BAD_WAKE.to_owned())
        );
        assert_eq!(
            with(&["--message", "m", "--webhook", "ftp://x"]),
            Err("--webhook must be a valid http(s) URL".to_owned())
        );
        assert_eq!(
            with(&[
                "--message",
                "m",
                "--webhook",
                "https://x.example",
                "--announce"
            ]),
            Err("Choose at most one of --announce, --no-deliver, or --webhook".to_owned())
        );
        assert_eq!(
            with(&[
                "--system-event",
                "t",
                "--delete-after-run",
                "--keep-after-run"
            ]),
            Err("Choose --delete-after-run or --keep-after-run, not both".to_owned())
        );
        assert!(
            with(&["--system-event", "t", "--model", "x"])
                .unwrap_err()
                .contains("are for --message jobs")
        );
        // `--deliver` is OpenClaw's deprecated spelling of `--announce`.
        assert_eq!(
            with(&["--message", "m", "--deliver"]).unwrap()["job"]["delivery"],
            json!({"mode": "announce"})
        );
    }

    #[test]
    fn update_builds_a_patch_of_the_flags_given() {
        let (call, tweak) = update(&["job-1", "--name", "renamed", "--disable"]).unwrap();
        assert_eq!(
            call,
            json!({"action": "update", "jobId": "job-1", "patch": {"name": "renamed", "enabled": false}})
        );
        assert_eq!(tweak, None);
        let (call, _) =
            update(&["job-1", "--every", "2h", "--model", "m", "--no-deliver"]).unwrap();
        assert_eq!(
            call["patch"],
            json!({
                "schedule": {"kind": "every", "everyMs": 7_200_000},
                "payload": {"kind": "agentTurn", "model": "m"},
                "delivery": {"mode": "none"},
            })
        );
        let (call, _) = update(&["job-1", "--system-event", "new text", "--wake", "now"]).unwrap();
        assert_eq!(
            call["patch"],
            json!({"wakeMode": "now", "payload": {"kind": "systemEvent", "text": "new text"}})
        );
        assert_eq!(
            update(&["job-1", "--system-event", "a", "--message", "b"]).unwrap_err(),
            "Choose at most one payload change"
        );
        assert_eq!(
            update(&["job-1", "--enable", "--disable"]).unwrap_err(),
            "Choose --enable or --disable, not both"
        );
        assert!(
            update(&["job-1"])
                .unwrap_err()
                .starts_with("nothing to change")
        );
        // `edit` is OpenClaw's name for it.
        assert!(matches!(
            parse(&["edit", "j", "--name", "x"]),
            CronCommand::Update(_)
        ));
        assert!(matches!(parse(&["rm", "j"]), CronCommand::Remove { .. }));
    }

    #[test]
    fn tz_or_stagger_alone_changes_the_current_cron_schedule() {
        let (mut call, tweak) = update(&["job-1", "--tz", "Asia/Tokyo", "--exact"]).unwrap();
        let tweak = tweak.expect("a tweak");
        assert_eq!(
            tweak,
            CronScheduleTweak {
                tz: Some("Asia/Tokyo".into()),
                stagger_ms: Some(0)
            }
        );
        apply_tweak(
            &mut call,
            &json!({"kind": "cron", "expr": "0 9 * * *"}),
            &tweak,
        )
        .unwrap();
        assert_eq!(
            call["patch"]["schedule"],
            json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Asia/Tokyo", "staggerMs": 0})
        );
        assert_eq!(
            apply_tweak(&mut call, &json!({"kind": "every", "everyMs": 5}), &tweak)
                .unwrap_err()
                .to_string(),
            "Current job is not a cron schedule; use --cron to convert first"
        );
    }

    #[test]
    fn run_runs_and_wake_map_to_their_calls() {
        assert_eq!(
            wake_call("check the oven", "now").unwrap(),
            json!({"action": "wake", "text": "check the oven", "mode": "now"})
        );
        assert_eq!(
            wake_call("x", "later").unwrap_err().to_string(),
            "--mode must be now or next-heartbeat"
        );
        assert!(matches!(
            parse(&["runs", "--id", "j", "--limit", "5"]),
            CronCommand::Runs {
                id: None,
                id_flag: Some(_),
                limit: 5,
                ..
            }
        ));
        assert!(Cli::try_parse_from(["cron", "runs"]).is_err());
        let mut page =
            json!({"entries": [{"ts": 3}, {"ts": 2}, {"ts": 1}], "limit": 50, "hasMore": false});
        keep_newest(&mut page, 2);
        assert_eq!(page["entries"], json!([{"ts": 3}, {"ts": 2}]));
        assert_eq!(page["hasMore"], true);
    }

    #[test]
    fn lists_render_one_line_per_job() {
        let page = json!({"jobs": [{
            "id": "0b7c5e8e-3f0a-4d2e-9c1b-2a6f8e4d1c3b", "name": "tea", "enabled": true,
            "schedule": {"kind": "every", "everyMs": 5_400_000},
            "state": {"nextRunAtMs": NOW + 3_600_000, "lastRunStatus": "ok"}
        }], "total": 1, "hasMore": false});
        let text = render_list(&page, NOW);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[1].starts_with("0b7c5e8e-3f0a-4d2e-9c1b-2a6f8e4d1c3b  tea "));
        assert!(lines[1].contains("every 1h30m"));
        assert!(lines[1].contains("2026-01-31T13:00:00Z (in 1h)"));
        assert!(lines[1].ends_with("  ok"));
        assert_eq!(render_list(&json!({"jobs": []}), NOW), "No cron jobs.");
        assert_eq!(render_runs(&json!({"entries": []})), "No runs.");
    }
}
