//! `ScheduledTimers` through the real AWS SDK against `moto_server` on loopback (started by
//! `infra/test`): the shared timers contract (its timers are short, so they go through SQS;
//! its three-hour timer becomes a schedule), and what only Scheduler does: a long timer
//! becomes one one-time schedule whose input, delivered to the timer queue, fires it once
//! due; one id scheduled twice is one schedule; cancel deletes it; overdue work never goes to
//! Scheduler.
//!
//! moto models Scheduler's API but never fires a schedule: the tests deliver a schedule's
//! input to the queue themselves, as Scheduler would. moto also ignores `ClientToken` and
//! does not check expressions, names or past `at()` times, so those are covered by the
//! adapter's unit tests. These tests fail, never skip, when the emulator is not there.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_scheduler::operation::get_schedule::{GetScheduleError, GetScheduleOutput};
use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindowMode};
use aws_sdk_sqs::types::QueueAttributeName;
use clawless_aws::scheduler::{at_expression, schedule_name};
use clawless_aws::testing::{
    RequestCounter, fresh_schedule_group, fresh_standard_queue, moto_sdk_config, queue_arn,
    scheduler_client, scheduler_client_with_counter, sqs_client,
};
use clawless_aws::{ScheduleTarget, ScheduledTimers, SqsTimers};
use clawless_core::testing::{
    CONTRACT_TIMER_VISIBILITY, TimersDeviations, sample_session_event, timers_contract,
};
use clawless_core::timers::{Timer, Timers};

/// The contract's timers are short, so they take the SQS path: no deduplication, and a
/// delayed message cannot be withdrawn.
const SHORT_TIMERS_ON_SQS: TimersDeviations = TimersDeviations {
    schedule_is_not_idempotent: true,
    cancel_does_not_withdraw: true,
};

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/clawless-scheduler";

fn wall_ms() -> u64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(elapsed.as_millis()).expect("milliseconds fit u64")
}

/// A timer queue, a schedule group, and timers over both.
struct Setup {
    sqs: aws_sdk_sqs::Client,
    scheduler: aws_sdk_scheduler::Client,
    queue_url: String,
    target: ScheduleTarget,
    /// Scheduler requests sent by the timers (not by the test's own client).
    scheduler_requests: RequestCounter,
    /// How often the timers built their Scheduler client.
    clients_built: Arc<AtomicUsize>,
    timers: ScheduledTimers,
}

impl Setup {
    async fn new() -> Self {
        let config = moto_sdk_config().await;
        let sqs = sqs_client(&config);
        let scheduler = scheduler_client(&config);
        let queue_url = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
        let dead_letter_url = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
        let target = ScheduleTarget {
            group_name: fresh_schedule_group(&scheduler).await,
            queue_arn: queue_arn(&sqs, &queue_url).await,
            role_arn: ROLE_ARN.to_owned(),
            dead_letter_arn: Some(queue_arn(&sqs, &dead_letter_url).await),
        };
        let scheduler_requests = RequestCounter::default();
        let clients_built = Arc::new(AtomicUsize::new(0));
        let timers = {
            let counter = scheduler_requests.clone();
            let built = Arc::clone(&clients_built);
            ScheduledTimers::new(
                SqsTimers::new(sqs.clone(), &queue_url)
                    .with_visibility_timeout(CONTRACT_TIMER_VISIBILITY),
                move || {
                    built.fetch_add(1, Ordering::SeqCst);
                    scheduler_client_with_counter(&config, &counter)
                },
                target.clone(),
            )
        };
        Self {
            sqs,
            scheduler,
            queue_url,
            target,
            scheduler_requests,
            clients_built,
            timers,
        }
    }

    async fn get_schedule(&self, timer_id: &str) -> Result<GetScheduleOutput, GetScheduleError> {
        self.scheduler
            .get_schedule()
            .group_name(&self.target.group_name)
            .name(schedule_name(timer_id))
            .send()
            .await
            .map_err(aws_sdk_scheduler::error::SdkError::into_service_error)
    }

    async fn schedule_names(&self) -> Vec<String> {
        let listed = self
            .scheduler
            .list_schedules()
            .group_name(&self.target.group_name)
            .send()
            .await
            .expect("ListSchedules");
        let mut names: Vec<String> = listed
            .schedules()
            .iter()
            .filter_map(|schedule| schedule.name().map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// Messages on the timer queue, visible or delayed.
    async fn queued_messages(&self) -> u64 {
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .expect("GetQueueAttributes")
            .attributes
            .unwrap_or_default();
        [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ]
        .iter()
        .map(|name| {
            attributes
                .get(name)
                .and_then(|count| count.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
    }

    /// What Scheduler does when a schedule fires: sends its input to its target queue.
    async fn fire(&self, input: &str) {
        self.sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(input)
            .send()
            .await
            .expect("SendMessage of the schedule's input");
    }

    /// Takes (and acks) until a timer comes or `within` has passed.
    async fn take_one(&self, within: Duration) -> Option<Timer> {
        let started = Instant::now();
        while started.elapsed() < within {
            let taken = self
                .timers
                .take_due(wall_ms(), 10, Duration::from_secs(1))
                .await
                .expect("take_due");
            if let Some(due) = taken.into_iter().next() {
                self.timers.ack(&due.receipt).await.expect("ack");
                return Some(due.timer);
            }
        }
        None
    }
}

fn timer(id: &str, due_at_ms: u64) -> Timer {
    Timer {
        timer_id: id.to_owned(),
        due_at_ms,
        event: sample_session_event(&format!("call-{id}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_timers_pass_the_timers_contract() {
    let config = moto_sdk_config().await;
    let sqs = sqs_client(&config);
    let scheduler = scheduler_client(&config);
    let group = fresh_schedule_group(&scheduler).await;
    timers_contract(
        || {
            let (sqs, scheduler, group) = (sqs.clone(), scheduler.clone(), group.clone());
            async move {
                let url = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
                let target = ScheduleTarget {
                    group_name: group,
                    queue_arn: queue_arn(&sqs, &url).await,
                    role_arn: ROLE_ARN.to_owned(),
                    dead_letter_arn: None,
                };
                Box::new(ScheduledTimers::new(
                    SqsTimers::new(sqs, url).with_visibility_timeout(CONTRACT_TIMER_VISIBILITY),
                    move || scheduler.clone(),
                    target,
                )) as Box<dyn Timers>
            }
        },
        SHORT_TIMERS_ON_SQS,
    )
    .await;
}

#[tokio::test]
async fn a_long_timer_becomes_one_one_time_schedule_that_sends_it_to_the_timer_queue() {
    // GIVEN a timer due in two hours and a millisecond
    let setup = Setup::new().await;
    let due_at = (wall_ms() / 1_000 + 2 * 3_600) * 1_000 + 1;
    let long = timer("deadline:job-7:1", due_at);

    // WHEN it is scheduled
    setup.timers.schedule(&long).await.unwrap();

    // THEN it is a one-time schedule at the due second (rounded up), in UTC, deleted after
    // it fires, whose target is the timer queue with the scheduler role and whose input is
    // the timer as the timer queue carries it
    let schedule = setup.get_schedule(&long.timer_id).await.unwrap();
    assert_eq!(
        schedule.name(),
        Some(schedule_name(&long.timer_id).as_str())
    );
    assert_eq!(
        schedule.group_name(),
        Some(setup.target.group_name.as_str())
    );
    assert_eq!(
        schedule.schedule_expression(),
        Some(at_expression(due_at).as_str())
    );
    assert_eq!(
        at_expression(due_at),
        at_expression(due_at - 1 + 1_000),
        "rounded up to the next whole second"
    );
    assert_eq!(schedule.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(
        schedule.flexible_time_window().map(|window| window.mode()),
        Some(&FlexibleTimeWindowMode::Off)
    );
    assert_eq!(
        schedule.action_after_completion(),
        Some(&ActionAfterCompletion::Delete)
    );
    let target = schedule.target().expect("a target");
    assert_eq!(target.arn(), setup.target.queue_arn);
    assert_eq!(target.role_arn(), ROLE_ARN);
    let input = target.input().expect("an input");
    assert_eq!(
        serde_json::from_str::<Timer>(input).unwrap(),
        long,
        "the input is the timer"
    );
    assert_eq!(input, serde_json::to_string(&long).unwrap());
    let retry = target.retry_policy().expect("a retry policy");
    assert_eq!(retry.maximum_event_age_in_seconds(), Some(86_400));
    assert_eq!(retry.maximum_retry_attempts(), Some(185));
    assert_eq!(
        target.dead_letter_config().and_then(|config| config.arn()),
        setup.target.dead_letter_arn.as_deref()
    );

    // AND nothing waits on the queue for it: no message hops every 15 minutes
    assert_eq!(setup.queued_messages().await, 0);
    assert_eq!(
        setup.schedule_names().await,
        vec![schedule_name(&long.timer_id)]
    );
}

#[tokio::test]
async fn a_schedules_input_delivered_to_the_timer_queue_fires_the_timer_once_due() {
    // GIVEN timers that schedule anything due more than a second away, and a timer due in
    // 3.5 s, which therefore becomes a schedule
    let mut setup = Setup::new().await;
    setup.timers = setup
        .timers
        .clone()
        .with_schedule_after(Duration::from_secs(1));
    let due_at = wall_ms() + 3_500;
    let long = timer("cron:job-3:slot-1", due_at);
    setup.timers.schedule(&long).await.unwrap();
    assert_eq!(
        setup.queued_messages().await,
        0,
        "nothing went to the queue"
    );
    let input = setup
        .get_schedule(&long.timer_id)
        .await
        .unwrap()
        .target()
        .and_then(|target| target.input())
        .expect("an input")
        .to_owned();

    // WHEN Scheduler fires it early (it fires within the scheduled minute; moto never
    // fires, so the test sends the input itself)
    setup.fire(&input).await;

    // THEN the early firing is chained, and the timer is taken once due, unchanged
    let taken = setup.take_one(Duration::from_secs(15)).await;
    assert_eq!(taken.as_ref(), Some(&long));
    assert!(wall_ms() >= due_at, "never early");
    assert_eq!(
        setup.take_one(Duration::from_secs(2)).await,
        None,
        "and only once"
    );
}

#[tokio::test]
async fn scheduling_one_timer_id_twice_leaves_one_schedule() {
    // GIVEN a long timer that is scheduled
    let setup = Setup::new().await;
    let due_at = wall_ms() + 3 * 3_600_000;
    let first = timer("heartbeat:main:slot-9", due_at);
    setup.timers.schedule(&first).await.unwrap();

    // WHEN the same id is scheduled again (a retry, or another instance), even for another
    // time
    setup.timers.schedule(&first).await.unwrap();
    let moved = timer("heartbeat:main:slot-9", due_at + 60_000);
    setup.timers.schedule(&moved).await.unwrap();

    // THEN there is one schedule, the first
    assert_eq!(
        setup.schedule_names().await,
        vec![schedule_name(&first.timer_id)]
    );
    let schedule = setup.get_schedule(&first.timer_id).await.unwrap();
    assert_eq!(
        schedule.schedule_expression(),
        Some(at_expression(due_at).as_str())
    );
}

#[tokio::test]
async fn cancel_deletes_the_schedule_and_cancelling_again_is_harmless() {
    // GIVEN two long timers
    let setup = Setup::new().await;
    let due_at = wall_ms() + 3_600_000;
    let cancelled = timer("deadline:job-1:0", due_at);
    let kept = timer("deadline:job-2:0", due_at);
    setup.timers.schedule(&cancelled).await.unwrap();
    setup.timers.schedule(&kept).await.unwrap();

    // WHEN one is cancelled, twice, and an id never scheduled too
    setup.timers.cancel(&cancelled.timer_id).await.unwrap();
    setup.timers.cancel(&cancelled.timer_id).await.unwrap();
    setup.timers.cancel("never-scheduled").await.unwrap();

    // THEN its schedule is gone and the other's is not
    let gone = setup.get_schedule(&cancelled.timer_id).await.unwrap_err();
    assert!(gone.is_resource_not_found_exception(), "{gone:?}");
    assert_eq!(
        setup.schedule_names().await,
        vec![schedule_name(&kept.timer_id)]
    );
}

#[tokio::test]
async fn an_overdue_timer_creates_no_schedule_and_is_taken_at_once() {
    // GIVEN a timer that was due a minute ago, and one due in two seconds
    let setup = Setup::new().await;
    let overdue = timer("deadline:job-late:0", wall_ms() - 60_000);
    let soon = timer("deadline:job-soon:0", wall_ms() + 2_000);

    // WHEN both are scheduled
    setup.timers.schedule(&overdue).await.unwrap();
    setup.timers.schedule(&soon).await.unwrap();

    // THEN neither asked Scheduler anything (its client was not even built) …
    assert_eq!(setup.scheduler_requests.count(), 0);
    assert_eq!(setup.clients_built.load(Ordering::SeqCst), 0);
    assert!(setup.schedule_names().await.is_empty());

    // … and the overdue one is taken at once, the other once due
    let started = Instant::now();
    assert_eq!(
        setup.take_one(Duration::from_secs(5)).await,
        Some(overdue.clone())
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "taken at once, not after {:?}",
        started.elapsed()
    );
    assert_eq!(
        setup.take_one(Duration::from_secs(10)).await,
        Some(soon.clone())
    );
    assert!(wall_ms() >= soon.due_at_ms, "never early");
}

#[tokio::test]
async fn the_scheduler_client_is_built_once_at_the_first_long_timer() {
    let setup = Setup::new().await;
    let due_at = wall_ms() + 3_600_000;
    for index in 0..3 {
        setup
            .timers
            .schedule(&timer(&format!("long-{index}"), due_at))
            .await
            .unwrap();
    }
    setup.timers.cancel("long-0").await.unwrap();
    assert_eq!(setup.clients_built.load(Ordering::SeqCst), 1);
    assert_eq!(
        setup.scheduler_requests.count(),
        4,
        "three CreateSchedule and one DeleteSchedule"
    );
    assert_eq!(setup.schedule_names().await.len(), 2);
}
