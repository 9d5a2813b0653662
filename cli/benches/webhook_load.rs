//! Webhook ingress under load, per channel, in local mode: the real webhook routes (signature
//! check, sender authorisation, claim in SQLite, enqueue on the SQLite turn queue) served on
//! 127.0.0.1, driven by an open-loop load generator on the same machine that sends a new,
//! correctly signed delivery every millisecond (1,000 req/s) to `generic`, `telegram`,
//! `slack` and `discord` in turn.
//!
//! Printed per channel: the rate achieved, p50 and p99 latency, and errors. Target: p99
//! under 10 ms at 1,000 req/s on a 2-core machine. The turn worker is not running: this
//! measures intake, which must answer within the platforms' 3-second deadlines no matter how
//! busy turns are. Usage: `cargo bench -p clawless --bench webhook_load [-- --quick]`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clawless_base::clock::SystemClock;
use clawless_base::session_key::DmScope;
use clawless_channels::webhook::GroupPolicy;
use clawless_channels::{
    DiscordChannel, GenericWebhook, PlatformChannel, SlackChannel, TelegramChannel, sign,
};
use clawless_local::sqlite::{SqliteDb, SqliteInbox, SqliteTurnQueue};
use clawless_runtime::ingress::{ChannelAccess, ChatChannel, Ingress, webhook_router};
use ed25519_dalek::{Signer, SigningKey};
use serde_json::json;
use tokio::sync::Mutex;

const SECRET: &[u8] = b"bench-generic-secret";
const TELEGRAM_SECRET: &str = "bench-telegram-secret";
const SLACK_SECRET: &[u8] = b"bench-slack-signing-secret";
const OWNER: &str = "1001";

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(0)
}

/// One correctly signed delivery: headers and body.
type Delivery = (Vec<(&'static str, String)>, Vec<u8>);

/// Makes the `n`-th delivery of a channel.
type MakeDelivery = Arc<dyn Fn(u64) -> Delivery + Send + Sync>;

fn generic(n: u64) -> Delivery {
    let body = json!({
        "message_id": format!("m-{n}"), "chat_id": "c-1",
        "sender_id": OWNER, "text": "hello", "chat_type": "direct"
    })
    .to_string()
    .into_bytes();
    (vec![("x-clawless-signature", sign(SECRET, &body))], body)
}

fn telegram(n: u64) -> Delivery {
    let owner: i64 = OWNER.parse().unwrap_or(1);
    let body = json!({
        "update_id": n,
        "message": {
            "message_id": n, "date": 0,
            "chat": {"id": owner, "type": "private"},
            "from": {"id": owner, "is_bot": false, "first_name": "Bench"},
            "text": "hello"
        }
    })
    .to_string()
    .into_bytes();
    (
        vec![(
            "x-telegram-bot-api-secret-token",
            TELEGRAM_SECRET.to_owned(),
        )],
        body,
    )
}

fn slack(n: u64) -> Delivery {
    let body = json!({
        "type": "event_callback", "event_id": format!("Ev{n}"), "team_id": "T1",
        "event": {
            "type": "message", "channel": "D0BENCH", "channel_type": "im",
            "user": OWNER, "text": "hello", "ts": format!("{n}.000100")
        }
    })
    .to_string()
    .into_bytes();
    let timestamp = (now_ms() / 1000).to_string();
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(&body);
    let hmac = sign(SLACK_SECRET, &base);
    let signature = format!("v0={}", hmac.trim_start_matches("sha256="));
    (
        vec![
            ("x-slack-request-timestamp", timestamp),
            ("x-slack-signature", signature),
        ],
        body,
    )
}

fn discord(key: &SigningKey, n: u64) -> Delivery {
    let body = json!({
        "id": format!("{}", 1_100_000_000_000_000_000_u64 + n), "application_id": "1234567890",
        "type": 2, "token": format!("interaction-token-{n}"), "version": 1,
        "channel_id": "2222", "guild_id": "3333",
        "member": {"user": {"id": OWNER, "username": "bench"}},
        "data": {"id": "1", "name": "ask", "type": 1,
                 "options": [{"name": "text", "type": 3, "value": "hello"}]}
    })
    .to_string()
    .into_bytes();
    let timestamp = (now_ms() / 1000).to_string();
    let mut signed = timestamp.clone().into_bytes();
    signed.extend_from_slice(&body);
    let signature = hex::encode(key.sign(&signed).to_bytes());
    (
        vec![
            ("x-signature-timestamp", timestamp),
            ("x-signature-ed25519", signature),
        ],
        body,
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len().saturating_sub(1))]
}

/// Sends one delivery every millisecond for `seconds`; prints rate and latency.
async fn drive(
    http: &reqwest::Client, url: &str, name: &str, seconds: u64, make: MakeDelivery, offset: u64,
) {
    let total = seconds * 1_000;
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for n in 0..total {
        ticker.tick().await;
        let (headers, body) = make(offset + n);
        let request = headers
            .into_iter()
            .fold(http.post(url), |request, (name, value)| {
                request.header(name, value)
            })
            .header("content-type", "application/json")
            .body(body);
        let latencies = Arc::clone(&latencies);
        let errors = Arc::clone(&errors);
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let elapsed = sent.elapsed().as_secs_f64() * 1e3;
                    latencies.lock().await.push(elapsed);
                }
                _ => {
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        if task.await.is_err() {
            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut samples = latencies.lock().await.clone();
    samples.sort_by(f64::total_cmp);
    println!(
        "{name:<8} {:>7.0} req/s   p50 {:>6.2} ms   p99 {:>6.2} ms   ({} ok, {} errors)",
        samples.len() as f64 / elapsed,
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.len(),
        errors.load(std::sync::atomic::Ordering::Relaxed)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let seconds = if quick { 3 } else { 10 };
    let dir = tempfile::tempdir().expect("temp dir");
    let db = SqliteDb::open(dir.path().join("clawless.db")).expect("database");
    let signing = SigningKey::from_bytes(&[7u8; 32]);
    let owners = vec![OWNER.to_owned()];
    let access = ChannelAccess {
        owners: owners.clone(),
        allow_from: Vec::new(),
        group_policy: GroupPolicy::Allowlist,
        require_mention: true,
        unauthorized_reply: None,
    };
    let platforms: Vec<Arc<dyn PlatformChannel>> = vec![
        Arc::new(GenericWebhook::new(SECRET)),
        Arc::new(TelegramChannel::new(
            TELEGRAM_SECRET,
            clawless_channels::telegram::BotIdentity {
                id: Some(42),
                username: Some("bench_bot".to_owned()),
            },
            true,
        )),
        Arc::new(SlackChannel::new(
            SLACK_SECRET,
            Some("UBENCHBOT".to_owned()),
        )),
        Arc::new(DiscordChannel::new(
            clawless_channels::discord::DiscordPublicKey::parse(&hex::encode(
                signing.verifying_key().to_bytes(),
            ))
            .expect("a valid key"),
        )),
    ];
    let channels: BTreeMap<String, ChatChannel> = platforms
        .into_iter()
        .map(|platform| {
            (
                platform.id().to_owned(),
                ChatChannel {
                    platform,
                    access: access.clone(),
                    outbox: None,
                },
            )
        })
        .collect();
    let ingress = Ingress {
        inbox: Arc::new(SqliteInbox::new(db.clone())),
        queue: Arc::new(SqliteTurnQueue::new(db)),
        channels,
        agent_id: "main".to_owned(),
        dm_scope: DmScope::PerChannelPeer,
        clock: Arc::new(SystemClock),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        axum::serve(listener, webhook_router(Arc::new(ingress)))
            .await
            .expect("server");
    });
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    println!(
        "webhook intake at 1,000 req/s for {seconds} s per channel (target: p99 under 10 ms; * = 1 s warm-up)"
    );
    let key = Arc::new(signing);
    let runs: Vec<(&str, MakeDelivery)> = vec![
        ("generic", Arc::new(generic)),
        ("telegram", Arc::new(telegram)),
        ("slack", Arc::new(slack)),
        ("discord", Arc::new(move |n| discord(&key, n))),
    ];
    for (index, (name, make)) in runs.into_iter().enumerate() {
        // Warm the connection pool and the route first.
        let url = format!("{base}/webhook/{name}");
        let offset = (index as u64 + 1) * 10_000_000;
        let warm_up = format!("{name}*");
        drive(
            &http,
            &url,
            &warm_up,
            1,
            Arc::clone(&make),
            offset + 5_000_000,
        )
        .await;
        drive(&http, &url, name, seconds, make, offset).await;
    }
}
