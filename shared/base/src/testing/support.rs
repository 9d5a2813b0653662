//! Helpers shared by the fakes and the contract suites of every crate:
//! run-unique ids and labels, poison-tolerant locking, an executor-free `sleep` and
//! `join_all`, and [`sized_json_body`] for exact-size record bodies.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Distinguishes stores created by
/// [`InMemoryObjectStore::new`](crate::testing::InMemoryObjectStore::new) and contract runs in
/// one process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A number unique within this process.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A label unique to one contract run in this process and, by its time component, across
/// processes sharing a backend: lowercase letters, digits and `-`.
pub fn run_label(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!(
        "{kind}-{:x}-{:x}-{}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff,
        next_id()
    )
}

/// Locks a test fake's state. Fakes mutate their state only in whole-statement updates, so a
/// panic elsewhere cannot leave it half-written: recovering from poisoning is safe.
pub fn lock_state<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sleeps for `duration` without an async runtime: a short-lived thread wakes the task.
/// Keeps the fakes and contract suites independent of any executor.
pub async fn sleep(duration: Duration) {
    #[derive(Default)]
    struct Alarm {
        rung: bool,
        waker: Option<Waker>,
    }
    let alarm = Arc::new(Mutex::new(Alarm::default()));
    let ringer = Arc::clone(&alarm);
    std::thread::spawn(move || {
        std::thread::sleep(duration);
        let mut alarm = lock_state(&ringer);
        alarm.rung = true;
        if let Some(waker) = alarm.waker.take() {
            waker.wake();
        }
    });
    std::future::poll_fn(|context| {
        let mut alarm = lock_state(&alarm);
        if alarm.rung {
            Poll::Ready(())
        } else {
            alarm.waker = Some(context.waker().clone());
            Poll::Pending
        }
    })
    .await;
}

/// Polls every future to completion concurrently on the current task and returns their
/// outputs in order. Lets test suites race operations without depending on an executor.
pub async fn join_all<'a, T>(futures: Vec<Pin<Box<dyn Future<Output = T> + Send + 'a>>>) -> Vec<T> {
    let mut pending: Vec<Option<Pin<Box<dyn Future<Output = T> + Send + 'a>>>> =
        futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = future.as_mut().poll(context)
            {
                *output = Some(value);
                *slot = None;
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// A JSON document of exactly `len` bytes with multi-byte characters, escapes and quotes in
/// it, so that any re-encoding or truncation shows.
///
/// # Panics
/// When `len` is too small to hold the document's frame (about 30 bytes plus the label).
pub fn sized_json_body(label: &str, len: usize) -> String {
    const PIECES: [&str; 6] = [
        "ünïcödé ",
        "文件 ",
        "🦀 ",
        "\\n\\t\\\"quoted\\\" ",
        "\\u0000 ",
        "plain ascii ",
    ];
    const TAIL: &str = "\"}";
    let mut body = format!("{{\"label\":\"{label}\",\"text\":\"");
    assert!(
        body.len() + TAIL.len() <= len,
        "a {len}-byte body cannot hold the label {label:?}"
    );
    for piece in PIECES.iter().cycle() {
        if body.len() + piece.len() + TAIL.len() > len {
            break;
        }
        body.push_str(piece);
    }
    while body.len() + TAIL.len() < len {
        body.push('.');
    }
    body.push_str(TAIL);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_bodies_have_exactly_the_requested_length() {
        for len in [40, 41, 42, 43, 44, 100, 1000, 65_536] {
            let body = sized_json_body("x", len);
            assert_eq!(body.len(), len);
            let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(parsed["label"], "x");
        }
    }
}
