//! The backend's own cost of a simple turn: one inbound message → one model call answering
//! text (no tools) → one reply. Prints the time per turn with the embedded adapters (SQLite
//! sessions, directory trees for skills, workspace and blobs) and, against moto, the DynamoDB,
//! S3 and SQS requests each turn makes, by operation.
//!
//! Model time is excluded by design: the model is an in-process [`ModelProvider`] that answers
//! at once, and replies go to an in-process [`Outbox`] that only counts them, so the figures
//! are what the backend itself spends (load, skills snapshot, bootstrap files, system prompt,
//! commits). On moto the wall time includes moto's own (Python) processing and is shown only
//! to compare runs; the request counts are the figures that carry over to AWS. (moto copies
//! the whole table for every item of a `TransactWriteItems`, so its turns slow down as the
//! bench fills the table; DynamoDB does not.)
//!
//! Targets: under 5 ms per warm simple turn with the embedded adapters (issue 8), under 1 ms
//! of CPU per warm embedded turn (the process's user + system time over the series, divided
//! by its turns), and at most 3 AWS requests per warm simple turn (issue 31).
//!
//! `cargo bench -p clawless --bench turn` runs the embedded cases; the moto cases run when
//! `CLAWLESS_TEST_AWS_ENDPOINT` points at moto (`infra/bench` starts one). `--quick` takes
//! fewer samples.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clawless_aws::{DynamoInbox, SqsTurnQueue};
use clawless_base::clock::SystemClock;
use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse, Usage};
use clawless_base::session_key::DmScope;
use clawless_base::transcript::{AssistantBlock, StopReason};
use clawless_core::turn::events::SessionEvent;
use clawless_runtime::config::bucket_layout_config;
use clawless_runtime::ingress::{ChannelAccess, ChatChannel, GroupPolicy, Ingress, IngressOutcome};
use clawless_runtime::turn_service::{TurnReport, TurnService};

use support::{
    AGENT, CountingOutbox, MotoClients, MotoDeployment, RequestLog, Requests, bundled_skills_dir,
    embedded_stack, files_below, moto_clients, moto_deployment, moto_stack, ms, turn_deps,
};

/// Generated skills added to the repository's bundled ones (as managed skills).
const GENERATED_SKILLS: usize = 50;
/// Turns a session has behind it in the "accumulated session" case.
const PRIOR_TURNS: usize = 10;
/// Turns run before measuring, so caches, connections and SQLite pages are warm.
const WARM_UPS: usize = 5;
/// The targets.
const EMBEDDED_TARGET: Duration = Duration::from_millis(5);
const CPU_TARGET: Duration = Duration::from_millis(1);
const AWS_REQUEST_TARGET: usize = 3;
/// The generic channel secret of the ingress case.
const SECRET: &[u8] = b"bench-secret";

/// Answers every request at once with a short text: the turn's model time is zero.
#[derive(Debug)]
struct InstantModel;

#[async_trait]
impl ModelProvider for InstantModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        std::hint::black_box(request);
        Ok(ModelResponse {
            content: vec![AssistantBlock::Text {
                text: "Done: nothing is scheduled for today.".to_owned(),
            }],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 4_000,
                output_tokens: 12,
                ..Usage::default()
            },
            model: self.model_ref(),
        })
    }

    fn model_ref(&self) -> String {
        "bench/instant".to_owned()
    }
}

/// The CPU time (user + system) this process has used, from `/proc/self/stat` (Linux, in
/// clock ticks of 10 ms).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|index| fields.get(*index)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Prints the CPU per turn of a series of `turns` turns that used `cpu`.
fn report_cpu(label: &str, cpu: Duration, turns: usize) {
    let per_turn = cpu / u32::try_from(turns.max(1)).unwrap_or(u32::MAX);
    let verdict = if per_turn < CPU_TARGET {
        "ok"
    } else {
        "MISSED"
    };
    println!(
        "  {label:<46} CPU {:>7.3} ms a turn   [{turns} turns, {:.0} ms in all]   target < {} ms: {verdict}",
        ms(per_turn),
        ms(cpu),
        CPU_TARGET.as_millis()
    );
}

/// Median and 90th percentile of `samples`.
fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let p90 = (samples.len() * 9).div_ceil(10).saturating_sub(1);
    (samples[samples.len() / 2], samples[p90])
}

/// One message from `chat`, unique by `n`, in that chat's own session.
fn inbound(chat: &str, n: usize) -> SessionEvent {
    support::inbound(chat, n, "What is on my calendar today?")
}

/// Runs one turn, checks it was simple, and returns how long it took.
async fn timed_turn(turns: &TurnService, event: &SessionEvent) -> Duration {
    let started = Instant::now();
    let report = turns.handle(event).await.expect("turn");
    let elapsed = started.elapsed();
    check_simple(&report);
    elapsed
}

fn check_simple(report: &TurnReport) {
    assert!(
        report.model_calls == 1
            && report.replies_sent == 1
            && report.tools_run == 0
            && !report.waiting,
        "not a simple turn: {report:?}"
    );
}

struct Samples {
    fresh: usize,
    accumulated: usize,
}

// ---------------------------------------------------------------------------------------------
// Embedded adapters

/// The system `clawless local` assembles: SQLite sessions offloading large documents to a
/// blob directory, skills and workspace in directories.
fn embedded_service(dir: &Path) -> (TurnService, Arc<CountingOutbox>) {
    let outbox = Arc::new(CountingOutbox::default());
    let stack = embedded_stack(dir, GENERATED_SKILLS, "");
    let deps = turn_deps(stack, Arc::new(InstantModel), outbox.clone());
    (TurnService::new(deps), outbox)
}

async fn bench_embedded(samples: &Samples) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (turns, outbox) = embedded_service(dir.path());
    let skills = files_below(&bundled_skills_dir())
        .iter()
        .filter(|(key, _)| key.ends_with("SKILL.md"))
        .count();
    println!(
        "embedded adapters: SQLite file + blob dir + skill/workspace dirs in {} ({skills} bundled + {GENERATED_SKILLS} generated skills)",
        dir.path().display()
    );

    let cold = timed_turn(&turns, &inbound("cold", 0)).await;
    println!(
        "  cold first turn (new process: skills parsed)   {:>8.3} ms",
        ms(cold)
    );

    for warm_up in 0..WARM_UPS {
        timed_turn(&turns, &inbound(&format!("warm-up-{warm_up}"), 0)).await;
    }
    let mut fresh: Vec<Duration> = Vec::with_capacity(samples.fresh);
    let cpu_before = process_cpu();
    for index in 0..samples.fresh {
        fresh.push(timed_turn(&turns, &inbound(&format!("fresh-{index}"), 0)).await);
    }
    let fresh_cpu = process_cpu().saturating_sub(cpu_before);
    report_embedded("warm turn, new session", &mut fresh);
    report_cpu("warm turn, new session", fresh_cpu, samples.fresh);

    let mut accumulated = Vec::with_capacity(samples.accumulated);
    let cpu_before = process_cpu();
    for index in 0..samples.accumulated {
        let chat = format!("long-{index}");
        for turn in 0..PRIOR_TURNS {
            timed_turn(&turns, &inbound(&chat, turn)).await;
        }
        accumulated.push(timed_turn(&turns, &inbound(&chat, PRIOR_TURNS)).await);
    }
    let accumulated_cpu = process_cpu().saturating_sub(cpu_before);
    report_embedded(
        &format!("warm turn, {PRIOR_TURNS} prior turns"),
        &mut accumulated,
    );
    report_cpu(
        "warm turns of sessions growing to 11 turns",
        accumulated_cpu,
        samples.accumulated * (PRIOR_TURNS + 1),
    );
    let expected = 1 + WARM_UPS + samples.fresh + samples.accumulated * (PRIOR_TURNS + 1);
    assert_eq!(outbox.sent(), expected, "one reply per turn");
}

fn report_embedded(label: &str, samples: &mut [Duration]) {
    let count = samples.len();
    let (median, p90) = percentiles(samples);
    let verdict = if p90 < EMBEDDED_TARGET {
        "ok"
    } else {
        "MISSED"
    };
    println!(
        "  {label:<46} median {:>7.3} ms   p90 {:>7.3} ms   [{count} turns]   target < {} ms (p90): {verdict}",
        ms(median),
        ms(p90),
        EMBEDDED_TARGET.as_millis()
    );
}

// ---------------------------------------------------------------------------------------------
// moto

/// The turn service as `AwsApp::turn_service` wires it (same adapters, the config
/// `CLAWLESS_BUCKET` yields), with the instant model and the counting outbox.
fn moto_service(clients: &MotoClients, deployment: &MotoDeployment) -> TurnService {
    let stack = moto_stack(
        clients,
        deployment,
        bucket_layout_config(&deployment.bucket),
    );
    let deps = turn_deps(
        stack,
        Arc::new(InstantModel),
        Arc::new(CountingOutbox::default()),
    );
    TurnService::new(deps)
}

/// Runs one turn and returns its wall time and requests.
async fn counted_turn(
    turns: &TurnService, log: &RequestLog, event: &SessionEvent,
) -> (Duration, Requests) {
    log.take();
    let elapsed = timed_turn(turns, event).await;
    (elapsed, Requests::from_log(&log.take()))
}

/// What a series of calls cost: wall time and each request mix with how many calls had it.
/// `target` marks the warm turns the request target applies to.
fn report_moto(
    label: &str, unit: &str, times: &mut [Duration], requests: &[Requests], target: bool,
) {
    let count = times.len();
    let (median, p90) = percentiles(times);
    println!(
        "  {label:<46} median {:>7.3} ms   p90 {:>7.3} ms   [{count} {unit}, moto time included]",
        ms(median),
        ms(p90),
    );
    let mut mixes: BTreeMap<&Requests, usize> = BTreeMap::new();
    for mix in requests {
        *mixes.entry(mix).or_insert(0) += 1;
    }
    for (mix, calls) in mixes {
        let verdict = match (target, mix.total() <= AWS_REQUEST_TARGET) {
            (false, _) => String::new(),
            (true, true) => format!("   target ≤ {AWS_REQUEST_TARGET}: ok"),
            (true, false) => format!("   target ≤ {AWS_REQUEST_TARGET}: MISSED"),
        };
        println!("      {calls:>3}×  {}{verdict}", mix.describe());
    }
}

async fn bench_moto(samples: &Samples) {
    let clients = moto_clients().await;
    let deployment = moto_deployment(&clients, GENERATED_SKILLS).await;
    println!(
        "moto: deployment bucket (bundled + {GENERATED_SKILLS} managed skills, agents/{AGENT}/workspace/{{AGENTS.md,SOUL.md}}), blob bucket, table, FIFO queue"
    );
    let log = &clients.log;

    let ingress = Ingress {
        inbox: Arc::new(DynamoInbox::new(
            clients.dynamodb.clone(),
            deployment.table.clone(),
        )),
        queue: Arc::new(SqsTurnQueue::new(
            clients.sqs.clone(),
            deployment.queue_url.clone(),
        )),
        channels: std::collections::BTreeMap::from([(
            "generic".to_owned(),
            ChatChannel {
                platform: Arc::new(clawless_channels::GenericWebhook::new(SECRET)),
                access: ChannelAccess {
                    owners: vec!["u-bench".to_owned()],
                    allow_from: vec!["*".to_owned()],
                    group_policy: GroupPolicy::Open,
                    require_mention: false,
                    unauthorized_reply: None,
                },
                outbox: None,
            },
        )]),
        agent_id: AGENT.to_owned(),
        dm_scope: DmScope::PerPeer,
        clock: Arc::new(SystemClock),
    };
    let mut ingress_times = Vec::new();
    let mut ingress_requests = Vec::new();
    let mut last_body = Vec::new();
    for index in 0..WARM_UPS + samples.fresh {
        let body = serde_json::json!({
            "message_id": format!("ingress-{index}"),
            "chat_id": format!("ingress-chat-{index}"),
            "sender_id": "u-bench",
            "text": "What is on my calendar today?",
            "chat_type": "direct",
        })
        .to_string()
        .into_bytes();
        let (elapsed, requests, outcome) = accept(&ingress, log, &body).await;
        assert!(
            matches!(outcome, IngressOutcome::Accepted { .. }),
            "{outcome:?}"
        );
        if index >= WARM_UPS {
            ingress_times.push(elapsed);
            ingress_requests.push(requests);
        }
        last_body = body;
    }
    report_moto(
        "ingress: claim + enqueue (webhook function)",
        "calls",
        &mut ingress_times,
        &ingress_requests,
        false,
    );
    let (_, duplicate, outcome) = accept(&ingress, log, &last_body).await;
    assert!(matches!(outcome, IngressOutcome::Duplicate), "{outcome:?}");
    println!(
        "  ingress: the same message again (duplicate)    {}",
        duplicate.describe()
    );

    let turns = moto_service(&clients, &deployment);
    let (cold, cold_requests) = counted_turn(&turns, log, &inbound("cold", 0)).await;
    report_moto(
        "cold first turn (new process, new session)",
        "turn",
        &mut [cold],
        &[cold_requests],
        false,
    );
    for warm_up in 0..WARM_UPS {
        counted_turn(&turns, log, &inbound(&format!("warm-up-{warm_up}"), 0)).await;
    }
    let mut times = Vec::new();
    let mut requests = Vec::new();
    for index in 0..samples.fresh {
        let (elapsed, mix) =
            counted_turn(&turns, log, &inbound(&format!("fresh-{index}"), 0)).await;
        times.push(elapsed);
        requests.push(mix);
    }
    report_moto(
        "warm turn, new session",
        "turns",
        &mut times,
        &requests,
        true,
    );

    let mut times = Vec::new();
    let mut requests = Vec::new();
    for index in 0..samples.accumulated {
        let chat = format!("long-{index}");
        for turn in 0..PRIOR_TURNS {
            counted_turn(&turns, log, &inbound(&chat, turn)).await;
        }
        let (elapsed, mix) = counted_turn(&turns, log, &inbound(&chat, PRIOR_TURNS)).await;
        times.push(elapsed);
        requests.push(mix);
    }
    report_moto(
        &format!("warm turn, {PRIOR_TURNS} prior turns"),
        "turns",
        &mut times,
        &requests,
        true,
    );
}

async fn accept(
    ingress: &Ingress, log: &RequestLog, body: &[u8],
) -> (Duration, Requests, IngressOutcome) {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        clawless_channels::SIGNATURE_HEADER,
        clawless_channels::sign(SECRET, body)
            .parse()
            .expect("signature is a header value"),
    );
    log.take();
    let started = Instant::now();
    let outcome = ingress.accept("generic", "", &headers, body).await;
    let elapsed = started.elapsed();
    (elapsed, Requests::from_log(&log.take()), outcome)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let embedded = if quick {
        Samples {
            fresh: 50,
            accumulated: 20,
        }
    } else {
        Samples {
            fresh: 200,
            accumulated: 200,
        }
    };
    let moto = if quick {
        Samples {
            fresh: 10,
            accumulated: 5,
        }
    } else {
        Samples {
            fresh: 40,
            accumulated: 15,
        }
    };
    println!(
        "simple turn: one inbound message → one model call answering text (no tools) → one reply"
    );
    println!(
        "model time excluded: an in-process model answers instantly; replies go to an in-process outbox"
    );
    bench_embedded(&embedded).await;
    if std::env::var_os(clawless_aws::testing::ENDPOINT_ENV).is_some() {
        bench_moto(&moto).await;
    } else {
        println!(
            "moto: not run; set {} (infra/bench starts moto)",
            clawless_aws::testing::ENDPOINT_ENV
        );
    }
}
