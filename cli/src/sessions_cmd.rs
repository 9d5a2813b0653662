//! `clawless sessions list|show`: what sessions did, for operators. Reads the session store
//! directly, never through a running system: the SQLite database of `clawless local`'s state
//! directory, or (`--aws`) a deployment's DynamoDB table and blob bucket with the operator's
//! own AWS credentials. Owns the terminal rendering of a transcript; the step and meta
//! documents are the turn engine's (`clawless_core::turn::state`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_automation::cron::run::CRON_SENDER_ID;
use clawless_automation::heartbeat::{AlertTarget, HeartbeatState};
use clawless_aws::{DynamoSessionStore, S3ObjectStore};
use clawless_base::object_store::ObjectStore;
use clawless_base::transcript::AssistantBlock;
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{SessionKey, SessionLister, SessionStore, StoredSession};
use clawless_core::subagents::{A2A_SENDER_ID, SUBAGENT_SENDER_ID};
use clawless_core::turn::state::{SessionMeta, Step, StepBody};
use clawless_local::DirObjectStore;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::aws_app::{BLOB_BUCKET_ENV, TABLE_ENV};
use clawless_runtime::nodes_service::EXEC_EXIT_EVENT_PREFIX;
use serde_json::{Value, json};

/// Prefix of offloaded transcript bodies, as the functions and `clawless local` write them.
const OFFLOAD_PREFIX: &str = "sessions/";
/// Characters of a tool result (or other long text) shown before it is cut.
const TEXT_LIMIT_CHARS: usize = 600;
/// Lines of a tool result shown before it is cut.
const TEXT_LIMIT_LINES: usize = 12;
/// Characters of a tool call's JSON arguments shown before they are cut.
const ARGS_LIMIT_CHARS: usize = 300;

/// `clawless sessions` options.
#[derive(Debug, Args)]
pub(crate) struct SessionsArgs {
    /// Read a deployed backend (its DynamoDB table, with your AWS credentials) instead of the
    /// local state directory.
    #[arg(long, global = true)]
    aws: bool,
    /// With --aws: the sessions table.
    #[arg(long, global = true, env = TABLE_ENV)]
    table: Option<String>,
    /// With --aws: the bucket of offloaded transcript content (large bodies show as pointers
    /// without it).
    #[arg(long, global = true, env = BLOB_BUCKET_ENV)]
    blob_bucket: Option<String>,
    /// The state directory of `clawless local`.
    #[arg(long, global = true, default_value = ".clawless")]
    state_dir: PathBuf,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Every session: key, last activity, turns, state, tokens; most recent first.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One session's transcript: messages, tool calls and results, replies, pending calls,
    /// and where compactions, memory flushes and resets happened. A session is a chain of
    /// generations (each `/new`, `/reset`, daily or idle reset starts one); the header lists
    /// them, and the current one is shown unless `--generation` names another.
    Show {
        /// The session key, e.g. agent:main:main (`clawless sessions list` shows them).
        key: String,
        /// Which generation to show: its number (0 is the first), or `all`.
        #[arg(long)]
        generation: Option<String>,
        /// Show tool results and arguments in full instead of cutting them.
        #[arg(long)]
        full: bool,
        /// Print the stored meta and steps as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What the session's next request would carry, as `/context` lists it in the chat: each
    /// system prompt section and workspace file, the tool schemas, the transcript and the
    /// summary, with sizes, and what was shortened for the window. Local state only (in a
    /// deployed agent's chat, send `/context`).
    Context {
        /// The session key, e.g. agent:main:main.
        key: String,
        /// List every tool schema, not only the largest.
        #[arg(long)]
        detail: bool,
        /// The configuration `clawless local` runs with (default: ./clawless.yaml if present).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

/// Appends one formatted line to a `String` (writing to a `String` cannot fail).
macro_rules! push_line {
    ($out:expr, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

/// The session store of one target, with a listing and the offloading wrapper for loads.
struct Sessions {
    store: Arc<dyn SessionStore>,
    lister: Arc<dyn SessionLister>,
    place: String,
}

async fn open(args: &SessionsArgs) -> anyhow::Result<Sessions> {
    if args.aws {
        let table = args
            .table
            .as_deref()
            .map(str::trim)
            .filter(|table| !table.is_empty())
            .with_context(|| format!("--aws needs the table: pass --table or set {TABLE_ENV}"))?;
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let dynamo = Arc::new(DynamoSessionStore::new(
            aws_sdk_dynamodb::Client::new(&shared),
            table,
        ));
        let store: Arc<dyn SessionStore> = match args.blob_bucket.as_deref().map(str::trim) {
            Some(bucket) if !bucket.is_empty() => {
                let blobs: Arc<dyn ObjectStore> = Arc::new(S3ObjectStore::new(
                    clawless_runtime::aws_env::s3_client_from(&shared),
                    bucket,
                ));
                Arc::new(OffloadingSessionStore::new(
                    dynamo.clone(),
                    blobs,
                    OFFLOAD_PREFIX,
                ))
            }
            _ => dynamo.clone(),
        };
        return Ok(Sessions {
            store,
            lister: dynamo,
            place: format!("DynamoDB table {table}"),
        });
    }
    let db_path = args.state_dir.join("clawless.db");
    if !db_path.is_file() {
        bail!(
            "no local sessions at {}: start `clawless local` once, pass --state-dir, or --aws for a deployment",
            db_path.display()
        );
    }
    let db = SqliteDb::open(&db_path).context("opening the local database")?;
    let sqlite = Arc::new(SqliteSessionStore::new(db));
    let blobs: Arc<dyn ObjectStore> = Arc::new(
        DirObjectStore::open(args.state_dir.join("blobs")).context("opening the blob store")?,
    );
    Ok(Sessions {
        store: Arc::new(OffloadingSessionStore::new(
            sqlite.clone(),
            blobs,
            OFFLOAD_PREFIX,
        )),
        lister: sqlite,
        place: db_path.display().to_string(),
    })
}

/// Runs `clawless sessions …`.
pub(crate) async fn run(args: SessionsArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        SessionsCommand::List { json } => list(&open(&args).await?, *json).await?,
        // Built as `clawless local` builds a turn, not read from the stores alone.
        SessionsCommand::Context {
            key,
            detail,
            config,
        } => return context(&args, key, *detail, config.as_deref()).await,
        SessionsCommand::Show {
            key,
            generation,
            full,
            json,
        } => {
            let which = match generation.as_deref() {
                None => Generation::Current,
                Some("all") => Generation::All,
                Some(number) => Generation::Number(number.parse().with_context(|| {
                    format!("--generation takes a number or `all`, not {number:?}")
                })?),
            };
            show(&open(&args).await?, key, which, *full, *json).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(sessions: &Sessions, as_json: bool) -> anyhow::Result<()> {
    let listed = sessions
        .lister
        .list_sessions()
        .await
        .with_context(|| format!("listing the sessions in {}", sessions.place))?;
    let mut rows = Vec::with_capacity(listed.len());
    for summary in listed {
        // A meta too large for one record was offloaded: only a full load brings it back.
        let meta = match serde_json::from_str::<SessionMeta>(&summary.meta) {
            Ok(meta) => Some(meta),
            Err(_) => match sessions.store.load(&summary.key).await {
                Ok(Some(stored)) => serde_json::from_str::<SessionMeta>(&stored.meta).ok(),
                Ok(None) | Err(_) => None,
            },
        };
        rows.push((summary.key, summary.version, meta));
    }
    rows.sort_by_key(|(_, _, meta)| std::cmp::Reverse(meta.as_ref().map(|m| m.updated_at_ms)));
    let rows = children_under_parents(rows);
    if as_json {
        let items: Vec<Value> = rows
            .iter()
            .map(|(key, version, meta)| {
                json!({
                    "key": key.as_str(),
                    "version": version,
                    "updatedAtMs": meta.as_ref().map(|m| m.updated_at_ms),
                    "turns": meta.as_ref().map(|m| m.turn),
                    "turnOpen": meta.as_ref().map(|m| m.turn_open),
                    "tokensIn": meta.as_ref().map(|m| m.tokens_in),
                    "tokensOut": meta.as_ref().map(|m| m.tokens_out),
                    "parent": meta.as_ref().and_then(|m| m.subagent.as_ref()).map(|run| run.start.parent_key.clone()),
                    "subagentStatus": meta.as_ref().and_then(|m| m.subagent.as_ref()).map(|run| run.status.clone()),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no sessions in {}", sessions.place);
        return Ok(());
    }
    let shown = |key: &SessionKey, meta: &Option<SessionMeta>| match meta
        .as_ref()
        .and_then(|meta| meta.subagent.as_ref())
    {
        Some(_) => format!("  └ {}", key.as_str()),
        None => key.as_str().to_owned(),
    };
    let width = rows
        .iter()
        .map(|(key, _, meta)| shown(key, meta).chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    println!(
        "{:<width$}  {:<20}  {:>5}  {:<14}  TOKENS IN/OUT",
        "KEY", "LAST ACTIVITY", "TURNS", "STATE"
    );
    for (key, _, meta) in &rows {
        match meta {
            Some(meta) => {
                let mut state = match &meta.subagent {
                    Some(run) if run.archived => format!("sub-agent {}, archived", run.status),
                    Some(run) => format!("sub-agent {}", run.status),
                    None if meta.turn_open => "turn open".to_owned(),
                    None => "idle".to_owned(),
                };
                if !meta.follow_ups.is_empty() {
                    state.push_str(&format!(" +{} queued", meta.follow_ups.len()));
                }
                println!(
                    "{:<width$}  {:<20}  {:>5}  {:<14}  {}/{}",
                    shown(key, &Some(meta.clone())),
                    utc(meta.updated_at_ms),
                    meta.turn,
                    state,
                    meta.tokens_in,
                    meta.tokens_out
                );
            }
            None => println!(
                "{:<width$}  {:<20}  {:>5}  {:<14}  -",
                key.as_str(),
                "?",
                "?",
                "unreadable meta"
            ),
        }
    }
    Ok(())
}

/// `rows` with each sub-agent's session right after the session that spawned it (children
/// in the order given), and every other row in the order given.
fn children_under_parents(
    rows: Vec<(SessionKey, u64, Option<SessionMeta>)>,
) -> Vec<(SessionKey, u64, Option<SessionMeta>)> {
    let parent_of = |meta: &Option<SessionMeta>| {
        meta.as_ref()
            .and_then(|meta| meta.subagent.as_ref())
            .map(|run| run.start.parent_key.clone())
    };
    let keys: Vec<String> = rows.iter().map(|(key, _, _)| key.to_string()).collect();
    let (children, tops): (Vec<_>, Vec<_>) = rows
        .into_iter()
        .partition(|(_, _, meta)| parent_of(meta).is_some_and(|parent| keys.contains(&parent)));
    let mut ordered = Vec::with_capacity(keys.len());
    let mut children: Vec<Option<_>> = children.into_iter().map(Some).collect();
    fn place(
        row: (SessionKey, u64, Option<SessionMeta>),
        children: &mut [Option<(SessionKey, u64, Option<SessionMeta>)>],
        ordered: &mut Vec<(SessionKey, u64, Option<SessionMeta>)>,
    ) {
        let key = row.0.to_string();
        ordered.push(row);
        for index in 0..children.len() {
            let is_child = children[index].as_ref().is_some_and(|(_, _, meta)| {
                meta.as_ref()
                    .and_then(|meta| meta.subagent.as_ref())
                    .is_some_and(|run| run.start.parent_key == key)
            });
            if is_child && let Some(child) = children[index].take() {
                place(child, children, ordered);
            }
        }
    }
    for row in tops {
        place(row, &mut children, &mut ordered);
    }
    ordered.extend(children.into_iter().flatten());
    ordered
}

/// Which generation `sessions show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    Current,
    All,
    Number(usize),
}

/// One generation of a stored transcript: its number, where it starts in `steps`, how many
/// steps it has, and the reset that began it (`None` for the first).
struct GenerationSpan {
    number: usize,
    start: usize,
    len: usize,
    began: Option<(u64, String)>,
}

/// Splits the stored steps at their reset steps.
fn generations(stored: &StoredSession) -> Vec<GenerationSpan> {
    let mut spans = vec![GenerationSpan {
        number: 0,
        start: 0,
        len: 0,
        began: None,
    }];
    for (index, stored_step) in stored.steps.iter().enumerate() {
        if let Ok(step) = serde_json::from_str::<Step>(&stored_step.body)
            && let StepBody::Reset { reason, .. } = &step.body
        {
            spans.push(GenerationSpan {
                number: spans.len(),
                start: index + 1,
                len: 0,
                began: Some((step.at_ms, reason.as_str().to_owned())),
            });
            continue;
        }
        if let Some(span) = spans.last_mut() {
            span.len += 1;
        }
    }
    spans
}

async fn show(
    sessions: &Sessions, raw_key: &str, which: Generation, full: bool, as_json: bool,
) -> anyhow::Result<()> {
    let key = SessionKey::parse(raw_key).with_context(|| {
        format!("{raw_key:?} is not a session key (agent:<agent id>:<rest>, e.g. agent:main:main)")
    })?;
    let stored = sessions
        .store
        .load(&key)
        .await
        .with_context(|| format!("loading session {key} from {}", sessions.place))?;
    let Some(stored) = stored else {
        bail!(
            "no session {key} in {} (`clawless sessions list` shows the keys)",
            sessions.place
        );
    };
    let spans = generations(&stored);
    let stored = match which {
        Generation::All => stored,
        Generation::Current | Generation::Number(_) => {
            let number = match which {
                Generation::Number(number) => number,
                _ => spans.len() - 1,
            };
            let Some(span) = spans.get(number) else {
                bail!(
                    "session {key} has generations 0 to {}; there is no generation {number}",
                    spans.len() - 1
                );
            };
            let from = span.start.saturating_sub(usize::from(span.began.is_some()));
            StoredSession {
                steps: stored.steps[from..span.start + span.len].to_vec(),
                ..stored
            }
        }
    };
    if as_json {
        let parse = |body: &str| {
            serde_json::from_str::<Value>(body).unwrap_or_else(|_| Value::String(body.to_owned()))
        };
        let steps: Vec<Value> = stored.steps.iter().map(|step| parse(&step.body)).collect();
        let document = json!({
            "key": key.as_str(),
            "version": stored.version,
            "meta": parse(&stored.meta),
            "steps": steps,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(());
    }
    let mut out = String::new();
    if spans.len() > 1 {
        push_line!(
            out,
            "generations (a reset starts one; older ones are archived, never deleted):"
        );
        for span in &spans {
            let began = match &span.began {
                Some((at, reason)) => format!("began {} by {reason}", utc(*at)),
                None => "the first".to_owned(),
            };
            let current = if span.number + 1 == spans.len() {
                " (current)"
            } else {
                ""
            };
            push_line!(
                out,
                "  #{} {began}, {} step(s){current}",
                span.number,
                span.len
            );
        }
        out.push('\n');
    }
    out.push_str(&render(&key, &stored, full));
    print!("{out}");
    Ok(())
}

/// The transcript as terminal text: a header from the meta, one block per step, then the
/// tool calls still waiting for a result.
fn render(key: &SessionKey, stored: &StoredSession, full: bool) -> String {
    let mut out = String::new();
    push_line!(out, "session {key} (version {})", stored.version);
    match serde_json::from_str::<SessionMeta>(&stored.meta) {
        Ok(meta) => {
            push_line!(
                out,
                "agent {} · created {} · last activity {} · {} turn(s), {} · tokens {} in / {} out",
                meta.agent_id,
                utc(meta.created_at_ms),
                utc(meta.updated_at_ms),
                meta.turn,
                if meta.turn_open { "turn open" } else { "idle" },
                meta.tokens_in,
                meta.tokens_out
            );
            if meta.untrusted {
                push_line!(
                    out,
                    "untrusted: someone other than an owner has written here; sandboxed unless \
                     agents.*.sandbox.mode says otherwise"
                );
            }
            push_line!(
                out,
                "generation {} since {} · {} compaction(s) in it · last reset {}",
                meta.generation,
                utc(meta.generation_started()),
                meta.compaction_count,
                meta.last_reset
                    .as_ref()
                    .map_or("none".to_owned(), |reset| format!(
                        "{} at {}",
                        reset.reason.as_str(),
                        utc(reset.at_ms)
                    ))
            );
            if let Some(chat) = &meta.chat {
                push_line!(
                    out,
                    "chat {} {} ({:?})",
                    chat.channel,
                    chat.chat_id,
                    chat.chat_type
                );
            }
            if let Some(heartbeat) = &meta.heartbeat {
                push_line!(out, "{}", heartbeat_line(heartbeat));
            }
            if let Some(run) = &meta.subagent {
                push_line!(
                    out,
                    "sub-agent of {} (run {}, depth {}/{}): {}{}",
                    run.start.parent_key,
                    run.start.run_id,
                    run.start.depth,
                    run.start.max_depth,
                    run.status,
                    if run.announced {
                        ", result announced"
                    } else {
                        ""
                    }
                );
            }
            for child in &meta.children {
                push_line!(
                    out,
                    "spawned {} ({}): {}",
                    child.child_key,
                    child.label.as_deref().unwrap_or(&child.task),
                    child.status
                );
            }
            if let Some(run) = &meta.cron_run {
                push_line!(
                    out,
                    "cron run in progress: job {} since {}",
                    run.job_id,
                    utc(run.started_at_ms)
                );
            }
            if !meta.pending_events.is_empty() {
                push_line!(
                    out,
                    "{} system event(s) waiting for the next heartbeat",
                    meta.pending_events.len()
                );
            }
            if !meta.follow_ups.is_empty() {
                push_line!(
                    out,
                    "{} message(s) queued for the next turn",
                    meta.follow_ups.len()
                );
            }
        }
        Err(err) => {
            push_line!(
                out,
                "meta unreadable ({err}): {}",
                cut(&stored.meta, full).0
            );
        }
    }
    let mut calls: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: BTreeMap<String, (String, bool)> = BTreeMap::new();
    // Whether the turn being shown was started by a cron job.
    let mut cron_turn = false;
    // Whether it is a sub-agent's task or a child's announce.
    let mut subagent_turn = false;
    // The turn relays a child's announced result to this session's chat.
    let mut announce_turn = false;
    for stored_step in &stored.steps {
        out.push('\n');
        let step: Step = match serde_json::from_str(&stored_step.body) {
            Ok(step) => step,
            Err(_) => {
                // Unreadable here, e.g. an offloaded body without --blob-bucket: show it raw.
                push_line!(out, "#{} ?", stored_step.seq);
                indent(&mut out, &cut(&stored_step.body, full).0);
                continue;
            }
        };
        out.push_str(&format!(
            "#{} {} turn {} ",
            step.seq,
            utc(step.at_ms),
            step.turn
        ));
        match &step.body {
            StepBody::Inbound {
                message_id,
                sender_id,
                text,
                dispatch,
                heartbeat,
                heartbeat_delivery,
                compact,
                images,
            } => {
                cron_turn =
                    sender_id == CRON_SENDER_ID || message_id.starts_with("heartbeat:cron:");
                subagent_turn = sender_id == SUBAGENT_SENDER_ID || sender_id == A2A_SENDER_ID;
                announce_turn =
                    sender_id == SUBAGENT_SENDER_ID && message_id.starts_with("announce:");
                let what = match (heartbeat, compact) {
                    _ if sender_id == A2A_SENDER_ID && message_id.ends_with(":request") => {
                        "AGENT-TO-AGENT MESSAGE (sessions_send)"
                    }
                    _ if sender_id == A2A_SENDER_ID && message_id.ends_with(":announce") => {
                        "AGENT-TO-AGENT ANNOUNCE STEP (a reply is posted to this chat)"
                    }
                    _ if sender_id == A2A_SENDER_ID => "AGENT-TO-AGENT REPLY STEP",
                    _ if subagent_turn && message_id.starts_with("announce:") => {
                        "SUB-AGENT RESULT (announced)"
                    }
                    _ if subagent_turn => "SUB-AGENT TASK",
                    (true, _) if message_id.contains(EXEC_EXIT_EVENT_PREFIX) => {
                        "BACKGROUND COMMAND ENDED (exec-event heartbeat)"
                    }
                    (true, _) if cron_turn => "CRON REMINDER (heartbeat)",
                    (true, _) => "HEARTBEAT",
                    (false, _) if cron_turn => "CRON RUN",
                    (false, Some(_)) => "USER /compact",
                    (false, None) => "USER",
                };
                push_line!(out, "{what} {sender_id} (message {message_id})");
                for image in images {
                    push_line!(out, "  image shown to the model: {image}");
                }
                if let Some(delivery) = heartbeat_delivery
                    .as_ref()
                    .filter(|_| (!cron_turn || *heartbeat) && !subagent_turn)
                {
                    let slot = delivery
                        .slot_ms
                        .map_or_else(|| "a wake".to_owned(), |slot| format!("slot {}", utc(slot)));
                    let target = match &delivery.target {
                        AlertTarget::Chat { chat } => format!("{} {}", chat.channel, chat.chat_id),
                        AlertTarget::TargetNone => "nowhere (target none)".to_owned(),
                        AlertTarget::NoTarget => "nowhere (no target)".to_owned(),
                        AlertTarget::DmBlocked => "nowhere (direct chats blocked)".to_owned(),
                    };
                    push_line!(out, "    ({slot}; an alert goes to {target})");
                }
                indent(&mut out, &cut(text, full).0);
                if let Some(dispatch) = dispatch {
                    push_line!(
                        out,
                        "    -> command calls {} {}",
                        dispatch.tool_name,
                        cut(&dispatch.params.to_string(), full).0
                    );
                }
            }
            StepBody::Assistant {
                content,
                stop_reason,
                model,
                usage,
            } => {
                push_line!(
                    out,
                    "ASSISTANT {model} (stop {stop_reason:?}, {} in / {} out)",
                    usage.input_tokens,
                    usage.output_tokens
                );
                for block in content {
                    match block {
                        AssistantBlock::Text { text } => indent(&mut out, &cut(text, full).0),
                        AssistantBlock::Thinking { text, .. } if !text.trim().is_empty() => {
                            push_line!(out, "    (thinking)");
                            indent(&mut out, &cut(text, full).0);
                        }
                        AssistantBlock::Thinking { .. } => {
                            push_line!(out, "    (thinking, redacted)")
                        }
                        AssistantBlock::ToolCall(call) => {
                            calls.insert(call.id.clone(), call.name.clone());
                            let arguments = call.input.to_string();
                            let arguments = if full || arguments.chars().count() <= ARGS_LIMIT_CHARS
                            {
                                arguments
                            } else {
                                let head: String =
                                    arguments.chars().take(ARGS_LIMIT_CHARS).collect();
                                format!("{head}… (arguments cut; --full shows all)")
                            };
                            push_line!(
                                out,
                                "    -> TOOL CALL {} [{}] {arguments}",
                                call.name,
                                call.id
                            );
                        }
                    }
                }
            }
            StepBody::ToolResult {
                call_id,
                tool_name,
                text,
                is_error,
            } => {
                pending.remove(call_id);
                calls.remove(call_id);
                let marker = if *is_error { " (error)" } else { "" };
                push_line!(out, "TOOL RESULT {tool_name} [{call_id}]{marker}");
                let (shown, note) = cut(text, full);
                indent(&mut out, &shown);
                if let Some(note) = note {
                    push_line!(out, "    {note}");
                }
                if let Some(session_id) = backgrounded_session(tool_name, text) {
                    push_line!(
                        out,
                        "    (BACKGROUND: process {session_id} runs on the node host; its end \
                         wakes this session)"
                    );
                }
            }
            StepBody::ToolPending {
                call_id,
                job_id,
                awaiting_approval,
                approved,
            } => {
                let tool = calls.get(call_id).cloned().unwrap_or_default();
                let state = match (awaiting_approval, approved) {
                    _ if tool == clawless_core::subagents::sessions_tools::SESSIONS_SEND => {
                        "sent to the other session; its answer comes back as the result".to_owned()
                    }
                    (true, _) => "awaiting approval".to_owned(),
                    (false, Some(decision)) => format!("sent to the node after {decision:?}"),
                    (false, None) => "sent to the node".to_owned(),
                };
                push_line!(out, "PENDING {tool} [{call_id}] job {job_id}: {state}");
                pending.insert(call_id.clone(), (job_id.clone(), *awaiting_approval));
            }
            StepBody::Reply { reply_id, text, to } => {
                match to {
                    Some(chat) => {
                        push_line!(out, "REPLY {reply_id} to {} {}", chat.channel, chat.chat_id);
                    }
                    None => push_line!(out, "REPLY {reply_id}"),
                }
                indent(&mut out, &cut(text, full).0);
            }
            StepBody::Reset {
                reason,
                previous_session_id,
                session_id,
            } => {
                push_line!(
                    out,
                    "=== RESET ({}): session {previous_session_id} archived; {session_id} begins",
                    reason.as_str()
                );
            }
            StepBody::Compaction {
                summary,
                first_kept_seq,
                tokens_before,
                tokens_after,
                trigger,
            } => {
                push_line!(
                    out,
                    "=== COMPACTION ({trigger:?}): ~{tokens_before} -> ~{tokens_after} tokens; \
                     steps before #{first_kept_seq} are this summary from now on"
                );
                indent(&mut out, &cut(summary, full).0);
            }
            StepBody::MemoryFlush {
                path,
                appended_bytes,
                error,
            } => match error {
                Some(error) => push_line!(out, "=== MEMORY FLUSH to {path} failed: {error}"),
                None => push_line!(
                    out,
                    "=== MEMORY FLUSH: {appended_bytes} byte(s) appended to {path}"
                ),
            },
            StepBody::HeartbeatOutcome { status, .. } if subagent_turn => {
                push_line!(
                    out,
                    "=== SUB-AGENT RUN ended ({status}): its result goes to the parent"
                );
            }
            StepBody::HeartbeatOutcome { status, reason } if cron_turn => {
                let reason = reason.as_deref().unwrap_or("no reason given");
                match status.as_str() {
                    "ok-token" | "ok-empty" => {
                        push_line!(out, "=== CRON RESULT ({status}): nothing to announce")
                    }
                    "sent" => push_line!(out, "=== CRON RESULT: announced (the reply below)"),
                    "failed" => push_line!(out, "=== CRON RUN FAILED: {reason}"),
                    _ => push_line!(out, "=== CRON RESULT not announced: {reason}"),
                }
            }
            StepBody::HeartbeatOutcome { status, reason } => {
                let reason = reason.as_deref().unwrap_or("no reason given");
                match status.as_str() {
                    "ok-token" | "ok-empty" => push_line!(
                        out,
                        "=== HEARTBEAT ACK ({status}): nothing needed attention; nothing sent"
                    ),
                    "sent" => push_line!(out, "=== HEARTBEAT ALERT: sent (the reply below)"),
                    "failed" => push_line!(out, "=== HEARTBEAT FAILED: {reason}"),
                    _ => push_line!(out, "=== HEARTBEAT ALERT not sent: {reason}"),
                }
            }
            StepBody::ReplySent { reply_id, rejected } => match rejected {
                Some(reason) => {
                    push_line!(out, "REPLY REJECTED {reply_id}: {reason}");
                    if announce_turn {
                        push_line!(
                            out,
                            "=== SUB-AGENT RESULT NOT DELIVERED: the chat refused the relay; the result stays in this transcript (above)"
                        );
                    }
                }
                None => {
                    push_line!(out, "REPLY SENT {reply_id}");
                }
            },
        }
    }
    if !pending.is_empty() || !calls.is_empty() {
        push_line!(out, "\nwaiting:");
        for (call_id, (job_id, awaiting)) in &pending {
            let tool = calls.get(call_id).map_or("", String::as_str);
            if *awaiting {
                let short: String = job_id.chars().take(8).collect();
                push_line!(
                    out,
                    "  {tool} [{call_id}] awaits approval: /approve {short} allow-once|allow-always|deny"
                );
            } else {
                if tool == clawless_core::subagents::sessions_tools::SESSIONS_SEND {
                    push_line!(
                        out,
                        "  {tool} [{call_id}] waits for the other session's answer"
                    );
                } else {
                    push_line!(out, "  {tool} [{call_id}] runs on a node (job {job_id})");
                }
            }
        }
        for (call_id, tool) in calls.iter().filter(|(id, _)| !pending.contains_key(*id)) {
            push_line!(out, "  {tool} [{call_id}] has no result yet");
        }
    }
    out
}

/// `heartbeats: next slot … · last ran|skipped (reason) at … · last alert at …`.
fn heartbeat_line(heartbeat: &HeartbeatState) -> String {
    let mut parts = Vec::new();
    if let Some(schedule) = &heartbeat.schedule {
        parts.push(format!(
            "next slot {} (every {}s)",
            utc(schedule.next_due_ms),
            schedule.interval_ms / 1000
        ));
    }
    if let Some(run) = &heartbeat.last_run {
        let reason = run
            .reason
            .as_ref()
            .map_or_else(String::new, |reason| format!(" ({reason})"));
        parts.push(format!("last {}{reason} at {}", run.status, utc(run.at_ms)));
    }
    if let Some(alert) = &heartbeat.last_alert {
        parts.push(format!("last alert at {}", utc(alert.sent_at_ms)));
    }
    if parts.is_empty() {
        parts.push("none yet".to_owned());
    }
    format!("heartbeats: {}", parts.join(" · "))
}

fn indent(out: &mut String, text: &str) {
    for line in text.lines() {
        push_line!(out, "    {line}");
    }
    if text.is_empty() {
        push_line!(out, "    (empty)");
    }
}

/// `text`, or its first [`TEXT_LIMIT_LINES`] lines and [`TEXT_LIMIT_CHARS`] characters with a
/// note saying how much was left out.
fn cut(text: &str, full: bool) -> (String, Option<String>) {
    let total_chars = text.chars().count();
    let total_lines = text.lines().count();
    if full || (total_chars <= TEXT_LIMIT_CHARS && total_lines <= TEXT_LIMIT_LINES) {
        return (text.to_owned(), None);
    }
    let mut shown: String = text
        .lines()
        .take(TEXT_LIMIT_LINES)
        .collect::<Vec<_>>()
        .join("\n");
    if shown.chars().count() > TEXT_LIMIT_CHARS {
        shown = shown.chars().take(TEXT_LIMIT_CHARS).collect();
    }
    let left = total_chars.saturating_sub(shown.chars().count());
    let note = format!("[cut: {left} more characters of {total_chars}; --full shows all]");
    let mut with_note = shown;
    with_note.push_str("\n…");
    (with_note, Some(note))
}

/// `YYYY-MM-DD HH:MM:SSZ` of Unix milliseconds (UTC): the turn's RFC 3339 timestamp, spaced.
fn utc(ms: u64) -> String {
    clawless_base::time::rfc3339_utc(ms).replacen('T', " ", 1)
}

/// `clawless sessions context <key>`: the report of the session's next request, built as
/// `clawless local` would build it.
async fn context(
    args: &SessionsArgs, key: &str, detail: bool, config: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    if args.aws {
        bail!(
            "`sessions context` reads the local state; in a deployed agent's chat, send /context"
        );
    }
    if !args.state_dir.join("clawless.db").is_file() {
        bail!(
            "no local sessions at {}: start `clawless local` once, or pass --state-dir",
            args.state_dir.display()
        );
    }
    let config = crate::local_cmd::local_config(config)?;
    let secrets = clawless_runtime::secrets::SecretValues::default();
    let model = clawless_llm::build_model(&config.models, &|name: &str| secrets.lookup(name))
        .context("model configuration")?;
    let options = clawless_runtime::local_mode::LocalOptions {
        config,
        state_dir: args.state_dir.clone(),
        listen: std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
        model,
        secrets,
    };
    match clawless_runtime::local_mode::local_context_report(options, key, detail).await? {
        Some(report) => {
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        None => bail!("no session {key} (`clawless sessions list` shows them)"),
    }
}

/// The process session id of an `exec` result that says its command went on in the
/// background (`Command still running (session <id>, pid …`).
fn backgrounded_session<'a>(tool_name: &str, text: &'a str) -> Option<&'a str> {
    if tool_name != clawless_core::nodes::exec_tool::EXEC_TOOL {
        return None;
    }
    let rest = text.strip_prefix("Command still running (session ")?;
    rest.split(',').next().filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20Z");
    }

    #[test]
    fn long_text_is_cut_with_a_note_unless_full() {
        let text = "x".repeat(TEXT_LIMIT_CHARS + 50);
        let (shown, note) = cut(&text, false);
        assert!(shown.len() < text.len());
        assert!(note.unwrap().contains("50 more characters"));
        assert_eq!(cut(&text, true), (text, None));
    }
}
