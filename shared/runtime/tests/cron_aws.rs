//! Cron's AWS path through the real AWS SDK against `moto_server` on loopback (started by
//! `infra/test`): the DynamoDB cron store, EventBridge Scheduler one-time schedules for
//! firings due beyond 15 minutes, the SQS timer and turn queues, and the turn service with a
//! scripted model. A job's firing becomes a schedule whose input, delivered as Scheduler
//! would, runs the job once and arms the next slot's schedule; redelivering the same input
//! changes nothing; removing the job deletes its schedule.
//!
//! moto models Scheduler's API but never fires a schedule: the test delivers the schedule's
//! input itself. It fails, never skips, when the emulator is not there.

mod support;

use clawless_core::testing::ManualClock;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_scheduler::types::ActionAfterCompletion;
use clawless_automation::cron::CronStore;
use clawless_automation::cron::run_log::RunsQuery;
use clawless_automation::cron::tool::{CronCaller, parse_cron_call};
use clawless_automation::cron::types::RunStatus;
use clawless_aws::scheduler::schedule_name;
use clawless_aws::testing::{
    dynamodb_client, fresh_fifo_queue, fresh_schedule_group, fresh_standard_queue, fresh_table,
    moto_sdk_config, queue_arn, scheduler_client, sqs_client,
};
use clawless_aws::{
    DynamoCronStore, DynamoSessionStore, ScheduleTarget, ScheduledTimers, SqsTimers, SqsTurnQueue,
};
use clawless_base::clock::Clock;
use clawless_core::session::{SessionStore, TurnQueue};
use clawless_core::timers::{Timer, Timers};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::cron_service::{CronDeps, CronService};
use serde_json::json;
use support::{ReplyReceiver, anthropic_text};

const MESSAGES: &str = "/v1/messages";
const HOUR: u64 = 3_600_000;
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/clawless-scheduler";

fn wall_ms() -> u64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(elapsed.as_millis()).expect("milliseconds fit u64")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_schedule_is_created_fired_once_by_its_input_and_deleted_with_the_job() {
    // GIVEN the turn service on moto: sessions and cron jobs in DynamoDB, timers on the
    // timer queue and Scheduler
    let config = moto_sdk_config().await;
    let dynamodb = dynamodb_client(&config);
    let sqs = sqs_client(&config);
    let scheduler = scheduler_client(&config);
    let table = fresh_table(&dynamodb).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    let target = ScheduleTarget {
        group_name: fresh_schedule_group(&scheduler).await,
        queue_arn: queue_arn(&sqs, &timer_queue).await,
        role_arn: ROLE_ARN.to_owned(),
        dead_letter_arn: None,
    };
    let timers: Arc<dyn Timers> = Arc::new(ScheduledTimers::new(
        SqsTimers::new(sqs.clone(), &timer_queue),
        {
            let config = config.clone();
            move || scheduler_client(&config)
        },
        target.clone(),
    ));
    let store: Arc<dyn CronStore> = Arc::new(DynamoCronStore::new(dynamodb.clone(), &table));
    let sessions: Arc<dyn SessionStore> =
        Arc::new(DynamoSessionStore::new(dynamodb.clone(), &table));
    let queue: Arc<dyn TurnQueue> = Arc::new(SqsTurnQueue::new(sqs.clone(), &turn_queue));
    let clock = Arc::new(ManualClock::at(wall_ms()));
    let model = ScriptedServer::start().await;
    let receiver = ReplyReceiver::start().await;
    let dir = tempfile::tempdir().expect("test fixture");
    std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
    std::fs::create_dir_all(dir.path().join("workspace")).expect("test fixture");
    let yaml = format!(
        "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n\
         models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
         anthropic:\n      apiKey: test-key\n      baseUrl: {base}\ntools:\n  deny: [web_fetch]\n",
        skills = dir.path().join("skills").display(),
        workspace = dir.path().join("workspace").display(),
        base = model.base_url(),
    );
    let app_config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let cron = Arc::new(CronService::new(CronDeps {
        store: Arc::clone(&store),
        timers: Arc::clone(&timers),
        queue,
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        config: Arc::new(app_config.clone()),
        store_label: Some(table.clone()),
    }));
    let turns = support::turn_service(
        &app_config,
        sessions,
        &receiver.url,
        Arc::clone(&clock) as Arc<dyn Clock>,
    )
    .with_cron(Arc::clone(&cron));
    let schedule_of = |timer_id: String| {
        let scheduler = scheduler.clone();
        let group = target.group_name.clone();
        async move {
            scheduler
                .get_schedule()
                .group_name(group)
                .name(schedule_name(&timer_id))
                .send()
                .await
        }
    };

    // WHEN an hourly job announcing to a chat is added
    let add = parse_cron_call(&json!({
        "action": "add",
        "job": {
            "name": "Hourly check",
            "schedule": {"kind": "every", "everyMs": HOUR},
            "payload": {"kind": "agentTurn", "message": "Anything to report?"},
            "delivery": {"mode": "announce", "channel": "generic", "to": "chat-1"}
        }
    }))
    .expect("a cron call");
    let added = cron.call(add, &CronCaller::default()).await.expect("added");
    let job_id = added["id"].as_str().expect("an id").to_owned();
    let slot = added["state"]["nextRunAtMs"].as_u64().expect("a next run");

    // THEN its firing is a one-time schedule on the timer queue, deleted after it fires
    let first = schedule_of(format!("cron:{job_id}:{slot}"))
        .await
        .expect("the firing's schedule");
    assert_eq!(
        first.action_after_completion(),
        Some(&ActionAfterCompletion::Delete)
    );
    let schedule_target = first.target().expect("a target");
    assert_eq!(schedule_target.arn(), target.queue_arn);
    let input = schedule_target.input().expect("an input").to_owned();
    let timer: Timer = serde_json::from_str(&input).expect("the input is a timer");
    assert_eq!(timer.due_at_ms, slot);

    // WHEN Scheduler delivers the input at the slot and the event reaches the turn service
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("All quiet this hour.")),
    );
    clock.set(slot);
    turns.handle(&timer.event).await.expect("firing");

    // THEN the run is announced once and logged, and the next slot has its own schedule
    assert_eq!(receiver.posted().len(), 1);
    assert_eq!(receiver.posted()[0].body["text"], "All quiet this hour.");
    let runs = store
        .runs(Some(&job_id), &RunsQuery::default())
        .await
        .expect("runs")
        .entries;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, Some(RunStatus::Ok));
    let job = store
        .get_job(&job_id)
        .await
        .expect("get")
        .expect("kept")
        .job;
    let next = job.state.next_run_at_ms.expect("a next run");
    assert!(next > slot);
    schedule_of(format!("cron:{job_id}:{next}"))
        .await
        .expect("the next slot's schedule");

    // WHEN the same input is delivered again (Scheduler and SQS deliver at least once)
    turns.handle(&timer.event).await.expect("redelivery");

    // THEN nothing changes: no model call, no message, one run
    assert_eq!(model.requests_to(MESSAGES).len(), 1);
    assert_eq!(receiver.posted().len(), 1);
    let again = store.get_job(&job_id).await.expect("get").expect("kept");
    assert_eq!(again.job, job);
    assert_eq!(
        store
            .runs(Some(&job_id), &RunsQuery::default())
            .await
            .expect("runs")
            .entries
            .len(),
        1
    );

    // WHEN the job is removed, THEN its pending schedule is deleted
    let remove = parse_cron_call(&json!({"action": "remove", "jobId": job_id})).expect("a call");
    cron.call(remove, &CronCaller::default())
        .await
        .expect("removed");
    assert!(
        schedule_of(format!("cron:{job_id}:{next}")).await.is_err(),
        "the schedule is gone"
    );
}
