//! Consuming the turn queue: one event at a time per session, retried on failure.
//!
//! The Lambda function gets its batches from the SQS trigger and reports failed message ids
//! (SQS moves an event that keeps failing to the dead-letter queue); local mode polls the
//! embedded queue with [`run_worker`] and keeps retrying with backoff, so nothing is dropped
//! unless it can never be processed. Both call [`process_event`]. Local mode runs sub-agent
//! sessions' events in a lane of their own ([`WorkerLanes`]), capped at
//! `agents.defaults.subagents.maxConcurrent`; on AWS the sub-agent queue's event source
//! mapping caps them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use clawless_core::session::{Delivery, TurnQueue};
use clawless_core::subagents::SubagentsConfig;
use clawless_core::turn::events::SessionEvent;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::turn_service::{Deadline, TurnError, TurnService};

/// What became of one queued event.
#[derive(Debug, PartialEq, Eq)]
pub enum Processed {
    /// Done (or waiting on a node): acknowledge it.
    Done,
    /// Failed in a way a redelivery may fix: leave it on the queue.
    Retry(String),
    /// It can never be processed: acknowledge and log it.
    Dropped(String),
}

/// Decodes and handles one queued event body.
pub async fn process_event(turns: &TurnService, body: &str) -> Processed {
    process_event_until(turns, body, None).await
}

/// [`process_event`] within an invocation's `deadline` (a turn that yields is `Done`: its
/// continuation is on the queue).
pub async fn process_event_until(
    turns: &TurnService, body: &str, deadline: Option<&Deadline>,
) -> Processed {
    let event: SessionEvent = match serde_json::from_str(body) {
        Ok(event) => event,
        Err(err) => return Processed::Dropped(format!("undecodable turn event: {err}")),
    };
    match turns.handle_until(&event, deadline).await {
        Ok(report) => {
            tracing::info!(session = %event.session_key, ?report, "turn event handled");
            Processed::Done
        }
        Err(err) if err.is_permanent() => Processed::Dropped(err.to_string()),
        Err(err) => {
            tracing::warn!(session = %event.session_key, error = ?err, "turn event failed; will retry");
            Processed::Retry(describe(&err))
        }
    }
}

fn describe(err: &TurnError) -> String {
    err.to_string()
}

/// Backoff before the n-th redelivery: 1 s, 2 s, 4 s, … capped at 30 s.
pub fn retry_delay(receive_count: u32) -> Duration {
    let exponent = receive_count.saturating_sub(1).min(5);
    Duration::from_secs((1u64 << exponent).min(30))
}

/// How many events of sessions other than sub-agents' local mode handles at once (sessions
/// run in parallel; the queue never hands out two events of one session at once).
pub const LOCAL_CONCURRENCY: usize = 8;

/// How many turn events [`run_worker`] handles at once, in two lanes: sub-agent sessions'
/// (keys with `:subagent:`) and everyone else's. Children filling their lane never hold an
/// event of another session back, as on AWS, where sub-agent sessions have their own queue
/// and a capped event source mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLanes {
    /// Events of sessions other than sub-agents' at once (at least 1).
    pub sessions: usize,
    /// Events of sub-agent sessions at once (at least 1): OpenClaw's global sub-agent lane,
    /// `agents.defaults.subagents.maxConcurrent`.
    pub subagents: usize,
}

impl WorkerLanes {
    /// Local mode's lanes: [`LOCAL_CONCURRENCY`] for sessions, `maxConcurrent` of `subagents`
    /// (`agents.defaults.subagents`) for sub-agent sessions.
    pub fn local(subagents: &SubagentsConfig) -> Self {
        Self {
            sessions: LOCAL_CONCURRENCY,
            subagents: usize::try_from(subagents.max_concurrent()).unwrap_or(usize::MAX),
        }
    }
}

/// Polls `queue` until `shutdown` resolves, handling deliveries of different sessions
/// concurrently within `lanes`: a new event is taken as soon as a slot is free, so one
/// session's long model call never holds another session's message.
pub async fn run_worker(
    turns: Arc<TurnService>, queue: Arc<dyn TurnQueue>, lanes: WorkerLanes,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let handle = move |body: String| {
        let turns = Arc::clone(&turns);
        async move { process_event(&turns, &body).await }
    };
    run_lanes(queue, lanes, handle, shutdown).await;
}

/// One lane of the worker: its free slots, and the deliveries received while it had none,
/// in the order they came. A waiting delivery stays in flight on the queue, so its session
/// gets no later event meanwhile and keeps its order.
struct Lane {
    slots: Arc<Semaphore>,
    waiting: VecDeque<Delivery>,
}

impl Lane {
    fn new(slots: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots.clamp(1, Semaphore::MAX_PERMITS))),
            waiting: VecDeque::new(),
        }
    }

    fn free(&self) -> usize {
        self.slots.available_permits()
    }

    /// Queues `delivery` to start when a slot frees. A redelivery of a waiting event (its
    /// visibility timeout ran out while it waited) takes the older delivery's place, whose
    /// receipt no longer works.
    fn wait(&mut self, delivery: Delivery) {
        match self
            .waiting
            .iter_mut()
            .find(|waiting| waiting.group == delivery.group)
        {
            Some(waiting) => *waiting = delivery,
            None => self.waiting.push_back(delivery),
        }
    }

    /// The first waiting delivery and a slot for it, when both are there.
    fn start_next(&mut self) -> Option<(Delivery, OwnedSemaphorePermit)> {
        if self.waiting.is_empty() {
            return None;
        }
        let permit = Arc::clone(&self.slots).try_acquire_owned().ok()?;
        self.waiting.pop_front().map(|delivery| (delivery, permit))
    }
}

/// [`run_worker`] with the handling of an event body passed in.
///
/// Receives at most as many deliveries as the two lanes have free slots, less the sessions
/// lane's waiting ones, so everything received either starts at once or waits for its own
/// lane: events of other sessions wait only while their lane is full (at most as many as
/// the sub-agent lane's free slots), children wait while theirs is, and a full sub-agent lane
/// never stops the worker from taking other sessions' events. At shutdown the waiting
/// deliveries go back to the queue at once, and the running ones finish.
async fn run_lanes<H, Fut>(
    queue: Arc<dyn TurnQueue>, lanes: WorkerLanes, handle: H,
    shutdown: impl std::future::Future<Output = ()>,
) where
    H: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Processed> + Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let handle = Arc::new(handle);
    let mut sessions = Lane::new(lanes.sessions);
    let mut subagents = Lane::new(lanes.subagents);
    let mut running = tokio::task::JoinSet::new();
    loop {
        // Reap finished handlers (their results are logged where they ran).
        while running.try_join_next().is_some() {}
        for lane in [&mut sessions, &mut subagents] {
            while let Some((delivery, permit)) = lane.start_next() {
                let handle = Arc::clone(&handle);
                let queue = Arc::clone(&queue);
                running.spawn(async move {
                    let outcome = handle(delivery.body.clone()).await;
                    acknowledge(queue.as_ref(), &delivery, &outcome).await;
                    drop(permit);
                });
            }
        }
        let room = sessions
            .free()
            .saturating_add(subagents.free())
            .saturating_sub(sessions.waiting.len());
        if room == 0 {
            tokio::select! {
                () = &mut shutdown => break,
                _ = running.join_next() => continue,
            }
        }
        let receive = queue.receive(room, Duration::from_millis(500));
        let deliveries = tokio::select! {
            () = &mut shutdown => break,
            received = receive => received,
        };
        match deliveries {
            Ok(deliveries) => {
                for delivery in deliveries {
                    if clawless_core::subagents::is_subagent_session_key(&delivery.group) {
                        subagents.wait(delivery);
                    } else {
                        sessions.wait(delivery);
                    }
                }
            }
            Err(err) => {
                tracing::error!(error = ?err, "turn queue receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    // Events that never started go back to the queue for the next run; the ones in hand
    // finish, as before a stop.
    for delivery in sessions.waiting.iter().chain(&subagents.waiting) {
        if let Err(err) = queue.release(&delivery.receipt, Duration::ZERO).await {
            tracing::error!(error = ?err, "turn queue release failed");
        }
    }
    while running.join_next().await.is_some() {}
}

/// Deletes a handled delivery, or releases it for a retry with backoff.
async fn acknowledge(queue: &dyn TurnQueue, delivery: &Delivery, outcome: &Processed) {
    let acknowledge = match outcome {
        Processed::Done => true,
        Processed::Dropped(reason) => {
            tracing::error!(%reason, group = %delivery.group, "turn event dropped");
            true
        }
        Processed::Retry(_) => false,
    };
    let result = if acknowledge {
        queue.delete(&delivery.receipt).await
    } else {
        queue
            .release(&delivery.receipt, retry_delay(delivery.receive_count))
            .await
    };
    if let Err(err) = result {
        tracing::error!(error = ?err, "turn queue acknowledgement failed");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use clawless_core::session::QueuedMessage;
    use clawless_core::testing::InMemoryTurnQueue;
    use tokio::sync::watch;

    use super::*;

    /// What the scripted handler saw: events by body, in start order, and how many child
    /// events ran at once at most.
    #[derive(Debug, Default)]
    struct Seen {
        started: Vec<String>,
        finished: Vec<String>,
        children_running: usize,
        most_children_running: usize,
        /// How many child events had started when the main session's event ran.
        children_started_when_main_ran: Option<usize>,
    }

    /// A handler under which every child event (body `child…`) runs until `gate` opens and
    /// any other event is done at once.
    fn gated_handler(
        seen: Arc<Mutex<Seen>>, gate: watch::Receiver<bool>,
    ) -> impl Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Processed> + Send>>
    + Send
    + Sync
    + 'static {
        move |body: String| {
            let seen = Arc::clone(&seen);
            let mut gate = gate.clone();
            Box::pin(async move {
                let child = body.starts_with("child");
                {
                    let mut seen = seen.lock().unwrap();
                    seen.started.push(body.clone());
                    if child {
                        seen.children_running += 1;
                        seen.most_children_running =
                            seen.most_children_running.max(seen.children_running);
                    } else {
                        let children = seen.started.iter().filter(|b| b.starts_with("child"));
                        seen.children_started_when_main_ran = Some(children.count());
                    }
                }
                if child {
                    let _ = gate.wait_for(|open| *open).await;
                }
                let mut seen = seen.lock().unwrap();
                if child {
                    seen.children_running -= 1;
                }
                seen.finished.push(body);
                Processed::Done
            })
        }
    }

    async fn send(queue: &InMemoryTurnQueue, group: &str, body: &str) {
        queue
            .send(&QueuedMessage {
                group: group.to_owned(),
                dedup_id: body.to_owned(),
                body: body.to_owned(),
            })
            .await
            .unwrap();
    }

    /// Waits up to 10 s for `done` to hold of what the handler saw.
    async fn until(seen: &Mutex<Seen>, what: &str, done: impl Fn(&Seen) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if done(&seen.lock().unwrap()) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                seen.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn children_beyond_their_lane_wait_while_the_main_session_still_runs() {
        // GIVEN four child sessions' events on the queue, and a worker whose sub-agent lane
        // holds two
        let queue = InMemoryTurnQueue::new();
        for n in 1..=4 {
            send(
                &queue,
                &format!("agent:main:subagent:{n}"),
                &format!("child-{n}"),
            )
            .await;
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (open_gate, gate) = watch::channel(false);
        let (stop, stopped) = watch::channel(false);
        let lanes = WorkerLanes {
            sessions: 8,
            subagents: 2,
        };
        let worker = tokio::spawn(run_lanes(
            Arc::new(queue.clone()),
            lanes,
            gated_handler(Arc::clone(&seen), gate),
            async move {
                let mut stopped = stopped;
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        ));
        until(&seen, "two children", |seen| seen.children_running == 2).await;
        // Time for the worker to take the other two children off the queue (and, were the
        // lane not enforced, to start them).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(seen.lock().unwrap().started.len(), 2);

        // WHEN the main session's event arrives while the children hold their lane
        send(&queue, "agent:main:main", "main").await;

        // THEN it runs, with still only two children started
        until(&seen, "the main session's event", |seen| {
            seen.finished.iter().any(|body| body == "main")
        })
        .await;
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.children_started_when_main_ran, Some(2), "{seen:?}");
            assert_eq!(seen.children_running, 2, "{seen:?}");
        }

        // WHEN the running children finish
        open_gate.send(true).unwrap();
        until(&seen, "every event", |seen| seen.finished.len() == 5).await;
        stop.send(true).unwrap();
        worker.await.unwrap();

        // THEN the other two ran after them, never more than two at once, and every event was
        // acknowledged
        assert!(
            queue.receive(10, Duration::ZERO).await.unwrap().is_empty(),
            "every event is deleted"
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.most_children_running, 2, "{seen:?}");
        let mut children: Vec<&String> = seen.started.iter().filter(|b| *b != "main").collect();
        children.sort_unstable();
        assert_eq!(children, ["child-1", "child-2", "child-3", "child-4"]);
    }

    #[tokio::test]
    async fn a_sessions_events_run_one_after_the_other_in_order() {
        // GIVEN three events of one child session and a lane of two
        let queue = InMemoryTurnQueue::new();
        for n in 1..=3 {
            send(&queue, "agent:main:subagent:1", &format!("step-{n}")).await;
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (_open_gate, gate) = watch::channel(true);
        let (stop, stopped) = watch::channel(false);
        let worker = tokio::spawn(run_lanes(
            Arc::new(queue.clone()),
            WorkerLanes {
                sessions: 8,
                subagents: 2,
            },
            gated_handler(Arc::clone(&seen), gate),
            async move {
                let mut stopped = stopped;
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        ));
        // WHEN the worker handles them
        until(&seen, "all three", |seen| seen.finished.len() == 3).await;
        stop.send(true).unwrap();
        worker.await.unwrap();
        // THEN each started after the previous one finished, in send order
        let seen = seen.lock().unwrap();
        assert_eq!(seen.started, ["step-1", "step-2", "step-3"]);
        assert_eq!(seen.finished, ["step-1", "step-2", "step-3"]);
    }

    #[tokio::test]
    async fn a_stop_gives_the_waiting_children_back_to_the_queue_at_once() {
        // GIVEN a sub-agent lane of one, held by a child, and a second child waiting for it
        let queue = InMemoryTurnQueue::new();
        send(&queue, "agent:main:subagent:1", "child-1").await;
        send(&queue, "agent:main:subagent:2", "child-2").await;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (open_gate, gate) = watch::channel(false);
        let (stop, stopped) = watch::channel(false);
        let worker = tokio::spawn(run_lanes(
            Arc::new(queue.clone()),
            WorkerLanes {
                sessions: 8,
                subagents: 1,
            },
            gated_handler(Arc::clone(&seen), gate),
            async move {
                let mut stopped = stopped;
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        ));
        until(&seen, "the first child", |seen| seen.started.len() == 1).await;
        // The second child has been received and waits for the lane.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(queue.receive(10, Duration::ZERO).await.unwrap().is_empty());

        // WHEN the worker stops (the running child finishing)
        stop.send(true).unwrap();
        open_gate.send(true).unwrap();
        worker.await.unwrap();

        // THEN the waiting child is on the queue again now, not after its visibility timeout
        assert_eq!(seen.lock().unwrap().finished, ["child-1"]);
        let back = queue.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(
            back.iter().map(|d| d.body.as_str()).collect::<Vec<_>>(),
            ["child-2"]
        );
    }

    #[test]
    fn local_lanes_take_the_sub_agent_cap_from_max_concurrent() {
        let default = WorkerLanes::local(&SubagentsConfig::default());
        assert_eq!(
            (default.sessions, default.subagents),
            (LOCAL_CONCURRENCY, 8)
        );
        let config: SubagentsConfig = serde_json::from_str(r#"{"maxConcurrent": 3}"#).unwrap();
        assert_eq!(WorkerLanes::local(&config).subagents, 3);
    }

    #[test]
    fn retries_back_off_exponentially_up_to_thirty_seconds() {
        let delays: Vec<u64> = (1..=8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
