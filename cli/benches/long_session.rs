//! A session that lasts forever: 1,000 messages in one chat (one session key) through a
//! scripted in-process model with a 16k-token window (`agents.defaults.contextTokens: 16000`),
//! once with the embedded adapters (SQLite sessions, directory stores) and once on moto
//! (DynamoDB, S3 and SQS through the real AWS SDK). The session is compacted again and again;
//! this bench owns the claim that a turn's cost does not grow with the session's age.
//!
//! Per turn it measures the backend's CPU time (`getrusage(RUSAGE_SELF)` around
//! `TurnService::handle`: the whole process, every thread; the model is in-process and
//! trivial, moto is another process), the AWS requests (moto; counted by an SDK interceptor),
//! the bytes the session store returned (a decorator summing meta and step bodies of
//! `load_live`/`load` results) and the tokens of the request that answered the message. The
//! figures "at" turns 10, 100 and 1,000 are means over the 10 turns ending there (1–10,
//! 91–100, 991–1000). Every turn must get exactly one reply (else the bench panics).
//!
//! Targets (the issue's): at turn 1,000 each figure is at most 1.5× its value at turn 10, and
//! no request exceeds the budget's limit (window − reserve = 12,000 tokens).
//!
//! Why messages of about 4 KB (~1,100 tokens): the context must fill up in a handful of turns,
//! so that the figures compare steady states (a session being compacted, at different ages),
//! not an empty session with a full one. With the system prompt and tools of today (~2,400
//! tokens), 4,400-character messages put the first compaction at turn 9 (flat 4,000 would put
//! it on turn 10 itself) and a compaction cycle at 7 turns, so turn 10 is already past the
//! first compaction; the output says where the first one came, and warns when that is not
//! before turn 10 any more.
//!
//! Three views help to read the figures (info, no targets): the same means over whole
//! compaction cycles (a 10-turn window holds one or two compactions depending on where it
//! falls in the 7-turn cycle, which moves its means); a control session (10 turns of a new
//! chat, run after turn 1,000 on the same store), which separates what the session's age does
//! from what the store's and process's state does; and the session meta's size at the end.
//! (On moto the CPU per turn rose with moto's slowness, not the session's age: the control
//! session, run when moto was slowest, cost the most. The process does no work while idle on
//! moto; a turn that follows a long wait runs on cold caches, on cores moto keeps busy.)
//!
//! The scripted model counts each request's tokens as ceil(chars/4) over the system prompt,
//! each message (text, tool-call JSON, tool result text) and the tools' JSON, records them,
//! refuses anything over the 16,000-token window as Anthropic does (`prompt is too long: N
//! tokens > 16000 maximum`), answers a summary request with a short five-heading summary of
//! fixed size, the memory flush with `NO_REPLY` (no tool call), and each message with a short
//! text.
//!
//! `cargo bench -p clawless --bench long_session` runs the embedded case (about 2 s); the
//! moto case runs when `CLAWLESS_TEST_AWS_ENDPOINT` points at moto (`infra/bench
//! long_session` starts one). On moto the wall time is shown only for information: moto copies
//! the whole table for every item of a `TransactWriteItems`, so its turns slow down as the
//! session fills the table (to almost a second per turn by turn 1,000: the moto case takes
//! about 10 minutes, and moto grew to 12 GB of memory on the 2-core VM this was written on);
//! DynamoDB does not. `--quick` skips the warm-up turns (then turn 1 is the process's cold
//! start, which flatters the ratios); it always runs all 1,000 turns.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse, Usage};
use clawless_base::transcript::{AssistantBlock, Message, StopReason};
use clawless_core::session::{
    SessionCommit, SessionKey, SessionStore, SessionStoreError, StoredSession,
};
use clawless_core::turn::events::SessionEvent;
use clawless_core::turn::state::{SessionState, StepBody};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::turn_service::TurnService;
use nix::sys::resource::{UsageWho, getrusage};

use support::{
    AGENT, CountingOutbox, RequestLog, Requests, Stack, embedded_stack, moto_clients,
    moto_deployment, moto_stack, ms, turn_deps,
};

/// The model's context window, in tokens.
const WINDOW: u64 = 16_000;
/// `window − reserve` of that window (reserve = min(20 000, window / 4)).
const PROMPT_LIMIT: u64 = WINDOW - WINDOW / 4;
/// Messages in the session.
const TURNS: usize = 1_000;
/// Characters of each message at most (~1,100 tokens; see the header comment).
const MESSAGE_CHARS: usize = 4_400;
/// The turns the figures are given at; each is the mean over the window of turns ending there.
const CHECKPOINTS: [usize; 3] = [10, 100, 1_000];
const WINDOW_TURNS: usize = 10;
/// The target: a figure at turn 1,000 is at most this times its value at turn 10.
const GROWTH_TARGET: f64 = 1.5;
/// Turns in another session before the measured one, so turn 1 is not the cold start.
const WARM_UPS: usize = 5;
/// The measured session's chat.
const CHAT: &str = "long-session";
/// The chat of the control session, run after the long one.
const CONTROL_CHAT: &str = "control";

/// What a request is, from what the service puts in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A summary for a compaction.
    Summary,
    /// The pre-compaction memory flush.
    Flush,
    /// Answering a message.
    Reply,
}

#[derive(Debug, Clone, Copy)]
struct Call {
    kind: Kind,
    tokens: u64,
    refused: bool,
}

/// The scripted model: counts, classifies and answers each request at once.
#[derive(Debug, Default)]
struct ScriptedModel {
    calls: Mutex<Vec<Call>>,
}

impl ScriptedModel {
    /// The calls made since the last call.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn tokens_of(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// ceil(chars / 4) of the system prompt (as sent, without the cache marker), of each
/// message (its text, tool calls as JSON, tool result text) and of the tools' JSON.
fn request_tokens(request: &ModelRequest) -> u64 {
    let messages: u64 = request
        .messages
        .iter()
        .map(|message| {
            let chars = match message {
                Message::User { text } | Message::ToolResult { text, .. } => text.chars().count(),
                Message::Assistant { content, .. } => content
                    .iter()
                    .map(|block| match block {
                        AssistantBlock::Text { text } => text.chars().count(),
                        AssistantBlock::ToolCall(call) => serde_json::to_string(call)
                            .expect("a tool call is JSON")
                            .chars()
                            .count(),
                        AssistantBlock::Thinking { .. } => 0,
                    })
                    .sum(),
            };
            tokens_of(chars)
        })
        .sum();
    let tools = serde_json::to_string(&request.tools).expect("tools are JSON");
    tokens_of(request.system_text().chars().count()) + messages + tokens_of(tools.chars().count())
}

fn last_user_text(request: &ModelRequest) -> &str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::User { text } => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

fn kind_of(request: &ModelRequest) -> Kind {
    if request
        .system
        .starts_with("You are a context summarization assistant")
    {
        Kind::Summary
    } else if last_user_text(request).contains("Pre-compaction memory flush.") {
        Kind::Flush
    } else {
        Kind::Reply
    }
}

/// A short summary with the five headings; its size does not depend on the session's. The
/// pending ask is the first line of the latest message summarised (where each message says
/// what it asks), so the service's quality check is satisfied on the first try.
fn summary(request: &ModelRequest) -> String {
    let conversation = last_user_text(request);
    let ask: String = conversation
        .rfind("[User]: ")
        .and_then(|at| conversation[at + "[User]: ".len()..].lines().next())
        .unwrap_or("none")
        .chars()
        .take(300)
        .collect();
    format!(
        "## Decisions\n- Each message's meeting notes are filed under project Falcon, in the \
         quarterly review file.\n## Open TODOs\n- File the notes of the next messages the same \
         way.\n## Constraints/Rules\n- Keep answers short.\n## Pending user asks\n- {ask}\n\
         ## Exact identifiers\n- project Falcon\n- chat {CHAT}\n"
    )
}

#[async_trait]
impl ModelProvider for ScriptedModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let tokens = request_tokens(request);
        let kind = kind_of(request);
        let refused = tokens > WINDOW;
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Call {
                kind,
                tokens,
                refused,
            });
        if refused {
            return Err(ModelError::Invalid {
                provider: "bench".to_owned(),
                message: format!("prompt is too long: {tokens} tokens > {WINDOW} maximum"),
            });
        }
        let text = match kind {
            Kind::Summary => summary(request),
            Kind::Flush => "NO_REPLY".to_owned(),
            Kind::Reply => {
                "Filed: these notes are under project Falcon, in the quarterly review file."
                    .to_owned()
            }
        };
        let output_tokens = tokens_of(text.chars().count());
        Ok(ModelResponse {
            content: vec![AssistantBlock::Text { text }],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: tokens,
                output_tokens,
                ..Usage::default()
            },
            model: self.model_ref(),
        })
    }

    fn model_ref(&self) -> String {
        "bench/scripted".to_owned()
    }
}

/// Counts what loads return: meta and step body bytes, and steps.
#[derive(Debug)]
struct CountingSessions {
    inner: Arc<dyn SessionStore>,
    bytes: AtomicU64,
    steps: AtomicU64,
}

impl CountingSessions {
    fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            bytes: AtomicU64::new(0),
            steps: AtomicU64::new(0),
        }
    }

    fn count(&self, loaded: &Option<StoredSession>) {
        if let Some(stored) = loaded {
            let bytes =
                stored.meta.len() + stored.steps.iter().map(|s| s.body.len()).sum::<usize>();
            self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            self.steps
                .fetch_add(stored.steps.len() as u64, Ordering::Relaxed);
        }
    }

    /// `(bytes, steps)` returned since the last call.
    fn take(&self) -> (u64, u64) {
        (
            self.bytes.swap(0, Ordering::Relaxed),
            self.steps.swap(0, Ordering::Relaxed),
        )
    }
}

#[async_trait]
impl SessionStore for CountingSessions {
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        let loaded = self.inner.load(key).await?;
        self.count(&loaded);
        Ok(loaded)
    }

    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        let loaded = self.inner.load_live(key).await?;
        self.count(&loaded);
        Ok(loaded)
    }

    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        self.inner.commit(key, commit).await
    }

    fn max_record_bytes(&self) -> usize {
        self.inner.max_record_bytes()
    }
}

/// The process's CPU time so far (user + system, every thread).
fn process_cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = |time: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(time.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(time.tv_usec()).unwrap_or(0))
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// Message `n`: one line saying what it asks, then ~4 KB of notes in the same words.
fn message(n: usize) -> String {
    let mut text = format!(
        "Message {n} of the long-session bench: please file these meeting notes under project \
         Falcon for the quarterly review.\n"
    );
    for line in 1.. {
        let next = format!(
            "- {:02}: these meeting notes of project Falcon go under the quarterly review file.\n",
            line % 100
        );
        if text.len() + next.len() > MESSAGE_CHARS {
            break;
        }
        text.push_str(&next);
    }
    text
}

/// What one turn cost.
#[derive(Debug, Default, Clone)]
struct TurnFigures {
    cpu: Duration,
    wall: Duration,
    requests: Vec<(String, String)>,
    loaded_bytes: u64,
    loaded_steps: u64,
    /// Tokens of the request that answered the message (the last reply request).
    reply_tokens: u64,
    model_calls: usize,
    compactions: usize,
    flushes: usize,
}

/// A measured session over one backend.
struct Run {
    label: String,
    turns: TurnService,
    outbox: Arc<CountingOutbox>,
    model: Arc<ScriptedModel>,
    sessions: Arc<CountingSessions>,
    log: Option<RequestLog>,
}

impl Run {
    fn new(label: String, stack: Stack, log: Option<RequestLog>) -> Self {
        let model = Arc::new(ScriptedModel::default());
        let outbox = Arc::new(CountingOutbox::default());
        let sessions = Arc::new(CountingSessions::new(stack.sessions.clone()));
        let stack = Stack {
            sessions: Arc::clone(&sessions) as Arc<dyn SessionStore>,
            ..stack
        };
        let turns = TurnService::new(turn_deps(stack, model.clone(), outbox.clone()));
        Self {
            label,
            turns,
            outbox,
            model,
            sessions,
            log,
        }
    }

    async fn turn(&self, event: &SessionEvent, what: &str) -> (TurnFigures, Vec<Call>) {
        self.model.take();
        self.sessions.take();
        if let Some(log) = &self.log {
            log.take();
        }
        let sent_before = self.outbox.sent();
        let cpu_before = process_cpu();
        let started = Instant::now();
        let report = self.turns.handle(event).await.unwrap_or_else(|err| {
            panic!("{}: {what} failed: {err}", self.label);
        });
        let wall = started.elapsed();
        let cpu = process_cpu().saturating_sub(cpu_before);
        let sent = self.outbox.sent() - sent_before;
        assert!(
            report.replies_sent == 1 && sent == 1,
            "{}: {what} got {sent} replies (report: {report:?}); every turn must get exactly one",
            self.label
        );
        let calls = self.model.take();
        let (loaded_bytes, loaded_steps) = self.sessions.take();
        let figures = TurnFigures {
            cpu,
            wall,
            requests: self.log.as_ref().map(RequestLog::take).unwrap_or_default(),
            loaded_bytes,
            loaded_steps,
            reply_tokens: calls
                .iter()
                .rev()
                .find(|call| call.kind == Kind::Reply && !call.refused)
                .map_or(0, |call| call.tokens),
            model_calls: calls.len(),
            compactions: 0,
            flushes: 0,
        };
        (figures, calls)
    }

    /// Runs the warm-ups (unless `quick`) and the measured session, and prints its report.
    async fn bench(&self, quick: bool) {
        let warm_ups = if quick { 0 } else { WARM_UPS };
        for n in 0..warm_ups {
            self.turn(
                &support::inbound("warm-up", n, &message(n)),
                &format!("warm-up turn {n}"),
            )
            .await;
        }
        let mut figures = Vec::with_capacity(TURNS);
        let mut calls = Vec::new();
        let started = Instant::now();
        for n in 1..=TURNS {
            let event = support::inbound(CHAT, n, &message(n));
            let (turn, turn_calls) = self.turn(&event, &format!("turn {n}")).await;
            figures.push(turn);
            calls.extend(turn_calls);
        }
        let elapsed = started.elapsed();
        // The control: a new session's first turns, on the store the long session filled.
        let mut control = Vec::with_capacity(WINDOW_TURNS);
        for n in 1..=WINDOW_TURNS {
            let event = support::inbound(CONTROL_CHAT, n, &message(n));
            let (turn, _) = self.turn(&event, &format!("control turn {n}")).await;
            control.push(turn);
        }
        let meta = self.count_compactions(CHAT, &mut figures).await;
        self.count_compactions(CONTROL_CHAT, &mut control).await;
        assert_eq!(
            self.outbox.sent(),
            warm_ups + TURNS + WINDOW_TURNS,
            "{}: one reply per turn",
            self.label
        );
        let outcome = Outcome {
            figures,
            control,
            calls,
            elapsed,
            warm_ups,
            meta,
        };
        report(&self.label, self.log.is_some(), &outcome);
    }

    /// Reads the whole transcript of `chat`'s session once (not counted), notes per turn the
    /// compactions and memory flushes it recorded, and returns what its meta holds at the end.
    async fn count_compactions(&self, chat: &str, figures: &mut [TurnFigures]) -> MetaFacts {
        let event = support::inbound(chat, 0, "");
        let key = SessionKey::parse(&event.session_key).expect("session key");
        let stored = self
            .sessions
            .inner
            .load(&key)
            .await
            .expect("load the whole session")
            .expect("the session exists");
        let state = SessionState::from_stored(key, &stored).expect("readable session");
        let meta = MetaFacts {
            bytes: stored.meta.len(),
            seen_ids: state.meta.seen_message_ids.len(),
            seen_ids_bytes: serde_json::to_string(&state.meta.seen_message_ids)
                .expect("ids are JSON")
                .len(),
        };
        assert_eq!(
            state.meta.turn as usize,
            figures.len(),
            "{}: the session of {chat} counts one turn per message",
            self.label
        );
        for step in &state.steps {
            let Some(turn) = (step.turn as usize)
                .checked_sub(1)
                .and_then(|index| figures.get_mut(index))
            else {
                continue;
            };
            match step.body {
                StepBody::Compaction { .. } => turn.compactions += 1,
                StepBody::MemoryFlush { .. } => turn.flushes += 1,
                _ => {}
            }
        }
        meta
    }
}

/// What a run measured.
struct Outcome {
    /// The long session's turns, in order.
    figures: Vec<TurnFigures>,
    /// The control session's turns.
    control: Vec<TurnFigures>,
    /// Every model call of the long session.
    calls: Vec<Call>,
    elapsed: Duration,
    warm_ups: usize,
    meta: MetaFacts,
}

/// The session's meta document at the end of the run.
struct MetaFacts {
    bytes: usize,
    /// Message ids it remembers for deduplication, and their bytes in the document.
    seen_ids: usize,
    seen_ids_bytes: usize,
}

/// The mean of `value` over turns `first..=last` (1-based).
fn mean(
    figures: &[TurnFigures], (first, last): (usize, usize), value: impl Fn(&TurnFigures) -> f64,
) -> f64 {
    let turns = &figures[first - 1..last];
    turns.iter().map(value).sum::<f64>() / turns.len() as f64
}

/// The window of turns a checkpoint's figures are the mean of.
fn window(checkpoint: usize) -> (usize, usize) {
    (checkpoint + 1 - WINDOW_TURNS, checkpoint)
}

/// Whole compaction cycles, from the turn after a compaction through the next compaction:
/// the first one, the last one ending by turn 100 and the last one of the run.
fn sample_cycles(figures: &[TurnFigures]) -> Vec<(usize, usize)> {
    let compacted: Vec<usize> = figures
        .iter()
        .enumerate()
        .filter(|(_, turn)| turn.compactions > 0)
        .map(|(index, _)| index + 1)
        .collect();
    let cycles: Vec<(usize, usize)> = compacted
        .windows(2)
        .map(|pair| (pair[0] + 1, pair[1]))
        .collect();
    let mut sample: Vec<(usize, usize)> = [
        cycles.first(),
        cycles.iter().rev().find(|(_, last)| *last <= 100),
        cycles.last(),
    ]
    .into_iter()
    .flatten()
    .copied()
    .collect();
    sample.dedup();
    sample
}

/// One figure of the report.
struct Row {
    label: &'static str,
    value: fn(&TurnFigures) -> f64,
    decimals: usize,
    /// Whether the growth target applies.
    target: bool,
}

fn rows(aws: bool) -> Vec<Row> {
    let mut rows = vec![Row {
        label: "backend CPU per turn (ms)",
        value: |turn| ms(turn.cpu),
        decimals: 3,
        target: true,
    }];
    if aws {
        rows.push(Row {
            label: "AWS requests per turn",
            value: |turn| turn.requests.len() as f64,
            decimals: 1,
            target: true,
        });
    }
    rows.extend([
        Row {
            label: "session store bytes returned",
            value: |turn| turn.loaded_bytes as f64,
            decimals: 0,
            target: true,
        },
        Row {
            label: "request tokens (answering call)",
            value: |turn| turn.reply_tokens as f64,
            decimals: 0,
            target: true,
        },
        Row {
            label: "wall time per turn (ms, info)",
            value: |turn| ms(turn.wall),
            decimals: 3,
            target: false,
        },
        Row {
            label: "steps loaded (info)",
            value: |turn| turn.loaded_steps as f64,
            decimals: 1,
            target: false,
        },
        Row {
            label: "model calls per turn (info)",
            value: |turn| turn.model_calls as f64,
            decimals: 1,
            target: false,
        },
        Row {
            label: "compactions per turn (info)",
            value: |turn| turn.compactions as f64,
            decimals: 2,
            target: false,
        },
    ]);
    rows
}

/// Prints `rows` as means over `spans` (headed by `headings`), with the last-to-first ratio;
/// returns each row's `(first, last)` means.
fn table(
    figures: &[TurnFigures], rows: &[Row], spans: &[(usize, usize)], headings: &[String],
) -> Vec<(f64, f64)> {
    print!("  {:<34}", "");
    for heading in headings {
        print!(" {heading:>15}");
    }
    println!(" {:>10}", "last/first");
    let mut ends = Vec::new();
    for row in rows {
        print!("  {:<34}", row.label);
        let values: Vec<f64> = spans
            .iter()
            .map(|&span| mean(figures, span, row.value))
            .collect();
        for value in &values {
            print!(" {:>15.*}", row.decimals, value);
        }
        let (first, last) = (values[0], values[values.len() - 1]);
        if first > 0.0 {
            println!(" {:>9.2}×", last / first);
        } else {
            println!(" {:>10}", "–");
        }
        ends.push((first, last));
    }
    ends
}

fn report(label: &str, aws: bool, outcome: &Outcome) {
    let Outcome {
        figures,
        control,
        calls,
        elapsed,
        warm_ups,
        meta,
    } = outcome;
    println!(
        "{label}: {TURNS} messages of {} chars in one session, {WINDOW}-token window ({:.1} s)",
        message(TURNS).len(),
        elapsed.as_secs_f64()
    );
    if *warm_ups == 0 {
        println!(
            "  (--quick: no warm-up turns, so the turn-10 figures include the process's cold first turn)"
        );
    }
    println!(
        "  \"at turn N\" = mean over the {WINDOW_TURNS} turns ending at N (turns 1–10, 91–100, 991–1000):"
    );
    let rows = rows(aws);
    let spans: Vec<(usize, usize)> = CHECKPOINTS.iter().map(|&c| window(c)).collect();
    let headings: Vec<String> = CHECKPOINTS
        .iter()
        .map(|checkpoint| format!("at turn {checkpoint}"))
        .collect();
    let ends = table(figures, &rows, &spans, &headings);

    let cycles = sample_cycles(figures);
    if cycles.len() > 1 {
        println!(
            "  the same means over whole compaction cycles (the turn after a compaction through the next one), \
             free of where a 10-turn window falls in the cycle (info):"
        );
        let headings: Vec<String> = cycles
            .iter()
            .map(|(first, last)| format!("turns {first}–{last}"))
            .collect();
        table(figures, &rows, &cycles, &headings);
    }
    // A new session on the store the long one filled: what the store's size alone does.
    let mut with_control = figures[..WINDOW_TURNS].to_vec();
    with_control.extend(control.iter().cloned());
    println!(
        "  control: a new session's turns 1–{WINDOW_TURNS}, run after turn {TURNS} on the same store, against the long session's (info):"
    );
    table(
        &with_control,
        &rows,
        &[(1, WINDOW_TURNS), (WINDOW_TURNS + 1, 2 * WINDOW_TURNS)],
        &["long session".to_owned(), "new session".to_owned()],
    );

    let peak = |kind: Option<Kind>| {
        calls
            .iter()
            .filter(|call| kind.is_none_or(|kind| call.kind == kind))
            .map(|call| call.tokens)
            .max()
            .unwrap_or(0)
    };
    let count = |kind: Kind| calls.iter().filter(|call| call.kind == kind).count();
    let refused = calls.iter().filter(|call| call.refused).count();
    let overall = peak(None);
    println!(
        "  peak request {overall} tokens (answering {}, memory flush {}, summary {}); budget limit window − reserve = {PROMPT_LIMIT}; refused by the model: {refused}",
        peak(Some(Kind::Reply)),
        peak(Some(Kind::Flush)),
        peak(Some(Kind::Summary)),
    );
    let compactions: usize = figures.iter().map(|turn| turn.compactions).sum();
    let flushes: usize = figures.iter().map(|turn| turn.flushes).sum();
    let first_compaction = figures.iter().position(|turn| turn.compactions > 0);
    println!(
        "  compactions {compactions} (first at turn {}), memory flushes {flushes}; model calls {} (answering {}, memory flush {}, summary {})",
        first_compaction.map_or("–".to_owned(), |index| (index + 1).to_string()),
        calls.len(),
        count(Kind::Reply),
        count(Kind::Flush),
        count(Kind::Summary),
    );
    if first_compaction.is_none_or(|index| index + 1 >= CHECKPOINTS[0]) {
        println!(
            "  NOTE  the first compaction did not come before turn {}: the turn-{} figures are not past it (see the header comment on the message size)",
            CHECKPOINTS[0], CHECKPOINTS[0]
        );
    }
    println!(
        "  session meta at turn {TURNS}: {} bytes, {} of them the {} message ids it remembers (seen_message_ids)",
        meta.bytes, meta.seen_ids_bytes, meta.seen_ids
    );
    if aws {
        for span in &spans {
            let log: Vec<(String, String)> = figures[span.0 - 1..span.1]
                .iter()
                .flat_map(|turn| turn.requests.iter().cloned())
                .collect();
            println!(
                "  AWS requests over turns {}–{}: {}",
                span.0,
                span.1,
                Requests::from_log(&log).describe()
            );
        }
    }
    for (row, (first, last)) in rows.iter().zip(ends) {
        if row.target {
            let pass = last <= GROWTH_TARGET * first;
            println!(
                "  {}  {}: turn {TURNS} {last:.prec$} ≤ {GROWTH_TARGET} × turn {} {first:.prec$}",
                if pass { "PASS" } else { "FAIL" },
                row.label,
                CHECKPOINTS[0],
                prec = row.decimals,
            );
        }
    }
    let pass = overall <= PROMPT_LIMIT;
    println!(
        "  {}  peak request {overall} tokens ≤ window − reserve {PROMPT_LIMIT}",
        if pass { "PASS" } else { "FAIL" }
    );
}

/// `agents.defaults` lines of the benchmark's configuration.
const DEFAULTS_YAML: &str = "    contextTokens: 16000\n";

async fn bench_embedded(quick: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let stack = embedded_stack(dir.path(), 0, DEFAULTS_YAML);
    let run = Run::new(
        format!(
            "embedded adapters (SQLite + blob dir + skill/workspace dirs in {})",
            dir.path().display()
        ),
        stack,
        None,
    );
    run.bench(quick).await;
}

async fn bench_moto(quick: bool) {
    let clients = moto_clients().await;
    let deployment = moto_deployment(&clients, 0).await;
    let bucket = &deployment.bucket;
    // What `CLAWLESS_CONFIG` would hold for this deployment: the bucket's conventional layout
    // and the 16k window.
    let yaml = format!(
        "skills:\n  bundled: s3://{bucket}/skills/bundled\n  managed: s3://{bucket}/skills/managed\n\
         agents:\n  defaults:\n    workspace: s3://{bucket}/agents/{AGENT}/workspace\n{DEFAULTS_YAML}"
    );
    let config = ClawlessConfig::from_yaml(&yaml, "bench").expect("config");
    let stack = moto_stack(&clients, &deployment, config);
    let run = Run::new(
        "moto (DynamoDB sessions offloading to S3, skills and workspace on S3)".to_owned(),
        stack,
        Some(clients.log.clone()),
    );
    run.bench(quick).await;
    // moto copies every table for each item of a transaction: leaving this one (a few
    // thousand 4 KB items) would slow down every later bench on the same moto.
    clients
        .dynamodb
        .delete_table()
        .table_name(&deployment.table)
        .send()
        .await
        .expect("delete the bench's table");
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    println!(
        "long session: {TURNS} messages in one session through a scripted in-process model \
         ({WINDOW}-token window); the model's and the outbox's time is in-process and trivial"
    );
    bench_embedded(quick).await;
    if std::env::var_os(clawless_aws::testing::ENDPOINT_ENV).is_some() {
        bench_moto(quick).await;
    } else {
        println!(
            "moto: not run; set {} (infra/bench starts moto)",
            clawless_aws::testing::ENDPOINT_ENV
        );
    }
}
