//! When heartbeats are due: `every` durations, the per-agent phase that spreads agents over
//! the interval, the next due time after each kind of run, the busy retry, and the daily
//! active-hours window.
//!
//! Times are milliseconds since the Unix epoch, as everywhere in clawless. The caller keeps a
//! [`HeartbeatSchedule`] per agent in durable state and arms an external timer for its
//! `next_due_ms`; nothing here sleeps or reads a clock.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use clawless_base::time::{TimeZone, local_minute_of_day, parse_time_zone};

use super::config::ActiveHoursConfig;
use super::reason::HeartbeatReason;
use super::run::{HeartbeatRunResult, SkipReason};

/// How long after a heartbeat skipped as `requests-in-flight` (or failed) it is tried again.
/// The delay is a floor: a later request for an immediate heartbeat does not shorten it.
pub const BUSY_RETRY_DELAY_MS: u64 = 1_000;

/// Parses a heartbeat duration: a decimal number with a unit (`ms`, `s`, `m`, `h`, `d`), a
/// bare number (minutes), or several numbers with units written together (`1h30m`). Case
/// and surrounding whitespace do not matter; anything else (`1h foo`, `-5m`, `abc`, empty)
/// is `None`. Fractions are rounded to the nearest millisecond: `1.5s` is 1500.
pub fn parse_duration_ms(text: &str) -> Option<u64> {
    clawless_base::time::parse_duration_ms(text, 60_000)
}

/// The agent's offset inside the interval: the first four bytes of
/// `sha256("<seed>:<agentId>")` as a big-endian number, modulo the interval. The seed is
/// fixed per deployment, so each agent keeps its slot across restarts while different agents
/// (and deployments) are spread out.
pub fn heartbeat_phase_ms(seed: &str, agent_id: &str, interval_ms: u64) -> u64 {
    if interval_ms == 0 {
        return 0;
    }
    let digest = Sha256::digest(format!("{seed}:{agent_id}").as_bytes());
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    u64::from(head) % interval_ms
}

/// The first instant strictly after `now_ms` that lies on the agent's phase
/// (`t mod interval == phase`); exactly on the phase, a whole interval later.
pub fn next_phase_slot_ms(now_ms: u64, interval_ms: u64, phase_ms: u64) -> u64 {
    if interval_ms == 0 {
        return now_ms;
    }
    let phase = phase_ms % interval_ms;
    let into_interval = now_ms % interval_ms;
    let wait = if into_interval < phase {
        phase - into_interval
    } else {
        interval_ms - into_interval + phase
    };
    now_ms.saturating_add(wait)
}

/// One agent's heartbeat timing, kept in durable state between invocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatSchedule {
    /// The interval between heartbeats.
    pub interval_ms: u64,
    /// The agent's offset inside the interval ([`heartbeat_phase_ms`]).
    pub phase_ms: u64,
    /// When the next interval heartbeat is due.
    pub next_due_ms: u64,
}

impl HeartbeatSchedule {
    /// A schedule for an agent whose heartbeats were not scheduled before: first due at the
    /// next phase slot after `now_ms`.
    pub fn new(seed: &str, agent_id: &str, interval_ms: u64, now_ms: u64) -> Self {
        let phase_ms = heartbeat_phase_ms(seed, agent_id, interval_ms);
        Self {
            interval_ms,
            phase_ms,
            next_due_ms: next_phase_slot_ms(now_ms, interval_ms, phase_ms),
        }
    }

    /// The schedule after the config was (re)loaded: the previous one is kept when its
    /// interval and phase are unchanged and its due time is still ahead; otherwise a new one
    /// starts from `now_ms`.
    pub fn reconcile(
        previous: Option<&HeartbeatSchedule>, seed: &str, agent_id: &str, interval_ms: u64,
        now_ms: u64,
    ) -> Self {
        let fresh = Self::new(seed, agent_id, interval_ms, now_ms);
        match previous {
            Some(previous)
                if previous.interval_ms == fresh.interval_ms
                    && previous.phase_ms == fresh.phase_ms
                    && previous.next_due_ms > now_ms =>
            {
                *previous
            }
            _ => fresh,
        }
    }

    /// True when an `interval` wake should run this agent. Other wakes run it regardless.
    pub fn is_due(&self, now_ms: u64) -> bool {
        self.next_due_ms <= now_ms
    }

    /// The schedule after a heartbeat that ended at `now_ms`:
    ///
    /// - `requests-in-flight` leaves it unchanged (the busy retry runs the heartbeat later);
    /// - after an `interval` heartbeat, the next phase slot;
    /// - after any other trigger (manual, cron, exec event, hook, wake), `now + interval`,
    ///   a cooldown, unless the heartbeat was skipped as `disabled`, which leaves it unchanged.
    pub fn after_run(
        &self, reason: &HeartbeatReason, result: &HeartbeatRunResult, now_ms: u64,
    ) -> Self {
        let next_due_ms = match (result, reason) {
            (HeartbeatRunResult::Skipped(SkipReason::RequestsInFlight), _) => self.next_due_ms,
            (_, HeartbeatReason::Interval) => {
                next_phase_slot_ms(now_ms, self.interval_ms, self.phase_ms)
            }
            (HeartbeatRunResult::Skipped(SkipReason::Disabled), _) => self.next_due_ms,
            _ => now_ms.saturating_add(self.interval_ms),
        };
        Self {
            next_due_ms,
            ..*self
        }
    }
}

/// How long until the same wake is tried again: [`BUSY_RETRY_DELAY_MS`] after
/// `requests-in-flight` or a failure, `None` otherwise.
pub fn retry_delay_ms(result: &HeartbeatRunResult) -> Option<u64> {
    match result {
        HeartbeatRunResult::Skipped(SkipReason::RequestsInFlight)
        | HeartbeatRunResult::Failed(_) => Some(BUSY_RETRY_DELAY_MS),
        _ => None,
    }
}

/// True when `now_ms` falls inside the configured active hours (always, when there are none).
///
/// - `start` is `HH:MM` from 00:00 to 23:59 and included; `end` is `HH:MM` or `24:00` and
///   excluded. Hours need two digits. A missing or invalid start or end ignores the window
///   (heartbeats run), so a typo never silences them.
/// - `end` before `start` wraps past midnight (`22:00`–`06:00`); `end == start` is an empty
///   window: never active.
/// - The zone: `user` (or unset, or an unknown IANA name) is `user_tz`, the user's zone from
///   `agents.defaults.userTimezone`; `local` is the server's zone, which for clawless is UTC
///   (the host's zone is never read); anything else is an IANA name.
pub fn is_within_active_hours(
    active_hours: Option<&ActiveHoursConfig>, now_ms: u64, user_tz: &TimeZone,
) -> bool {
    let Some(active) = active_hours else {
        return true;
    };
    let start = active
        .start
        .as_deref()
        .and_then(|s| parse_clock_minutes(s, false));
    let end = active
        .end
        .as_deref()
        .and_then(|e| parse_clock_minutes(e, true));
    let (Some(start), Some(end)) = (start, end) else {
        return true;
    };
    if start == end {
        return false;
    }
    let tz = active_hours_zone(active.timezone.as_deref(), user_tz);
    let now = local_minute_of_day(now_ms, &tz);
    if start < end {
        start <= now && now < end
    } else {
        now >= start || now < end
    }
}

fn active_hours_zone(name: Option<&str>, user_tz: &TimeZone) -> TimeZone {
    match name.map(str::trim).filter(|name| !name.is_empty()) {
        None | Some("user") => user_tz.clone(),
        Some("local") => TimeZone::UTC,
        Some(name) => parse_time_zone(name).unwrap_or_else(|_| user_tz.clone()),
    }
}

/// `HH:MM` (00:00–23:59, two-digit hours and minutes) as minutes since midnight; `24:00` too
/// when `allow_midnight_end`.
fn parse_clock_minutes(text: &str, allow_midnight_end: bool) -> Option<u16> {
    let (hours, minutes) = text.split_once(':')?;
    let two_digits = |part: &str| {
        (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u16>().ok())
            .flatten()
    };
    let (hours, minutes) = (two_digits(hours)?, two_digits(minutes)?);
    match (hours, minutes) {
        (24, 0) if allow_midnight_end => Some(24 * 60),
        (0..=23, 0..=59) => Some(hours * 60 + minutes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_base::time::parse_time_zone;

    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;

    /// Milliseconds of an RFC 3339 instant, parsed by jiff (not by the code under test).
    fn at(instant: &str) -> u64 {
        let ts: jiff::Timestamp = instant.parse().expect("valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    fn window(start: &str, end: &str, timezone: Option<&str>) -> ActiveHoursConfig {
        ActiveHoursConfig {
            start: Some(start.to_owned()),
            end: Some(end.to_owned()),
            timezone: timezone.map(str::to_owned),
        }
    }

    #[test]
    fn intervals_parse_minutes_units_and_composites() {
        // Spec §6 vector 8.
        assert_eq!(
            crate::heartbeat::config::parse_interval_ms("30"),
            Some(1_800_000)
        );
        assert_eq!(
            crate::heartbeat::config::parse_interval_ms("1h30m"),
            Some(5_400_000)
        );
        for disabled in ["0m", "", "abc", "1h foo"] {
            assert_eq!(
                crate::heartbeat::config::parse_interval_ms(disabled),
                None,
                "{disabled:?}"
            );
        }
    }

    #[test]
    fn durations_accept_every_unit_fractions_and_any_case() {
        assert_eq!(parse_duration_ms("250ms"), Some(250));
        assert_eq!(parse_duration_ms("45s"), Some(45_000));
        assert_eq!(parse_duration_ms(" 2H "), Some(2 * HOUR));
        assert_eq!(parse_duration_ms("1d"), Some(24 * HOUR));
        assert_eq!(parse_duration_ms("1.5h"), Some(90 * MINUTE));
        assert_eq!(parse_duration_ms("1d2h3m4s5ms"), Some(93_784_005));
        assert_eq!(parse_duration_ms("0"), Some(0));
        for invalid in ["-5m", "5 m", "1h 30m", "30x", "h", "1..5m", "1e3", "5m30"] {
            assert_eq!(parse_duration_ms(invalid), None, "{invalid:?}");
        }
    }

    #[test]
    fn the_phase_is_the_hash_of_seed_and_agent_modulo_the_interval() {
        let interval = 30 * MINUTE;
        let phase = heartbeat_phase_ms("device-1", "main", interval);
        assert!(phase < interval);
        assert_eq!(phase, heartbeat_phase_ms("device-1", "main", interval));
        // sha256("device-1:main") computed independently: the leading four bytes.
        let digest = Sha256::digest(b"device-1:main");
        let head = u64::from(u32::from_be_bytes([
            digest[0], digest[1], digest[2], digest[3],
        ]));
        assert_eq!(phase, head % interval);
        assert_ne!(
            heartbeat_phase_ms("device-1", "ops", interval),
            phase,
            "another agent lands elsewhere (for these inputs)"
        );
        assert_eq!(heartbeat_phase_ms("device-1", "main", 0), 0);
    }

    #[test]
    fn next_due_is_the_next_phase_slot_strictly_after_now() {
        // Spec §6 vector 10: exactly on the phase waits a whole interval…
        assert_eq!(
            next_phase_slot_ms(1_000_000_000, 300_000, 100_000),
            1_000_300_000
        );
        // …and past the phase waits for the next slot.
        assert_eq!(
            next_phase_slot_ms(1_000_050_000, 300_000, 100_000),
            1_000_300_000
        );
        // Before the phase inside the interval: later in the same interval.
        assert_eq!(
            next_phase_slot_ms(999_950_000, 300_000, 100_000),
            1_000_000_000
        );
    }

    #[test]
    fn a_non_interval_heartbeat_pushes_the_next_one_a_full_interval_out() {
        // Spec §6 vector 11: a cron-triggered heartbeat that ran at T → next due T + I.
        let interval = 30 * MINUTE;
        let schedule = HeartbeatSchedule::new("seed", "main", interval, 0);
        let t = 5 * HOUR + 7 * MINUTE;
        let ran = HeartbeatRunResult::Ran { duration_ms: 900 };
        let cron = HeartbeatReason::parse("cron:job-1");
        assert_eq!(schedule.after_run(&cron, &ran, t).next_due_ms, t + interval);
        // A skip other than `disabled` still counts as a run of that trigger.
        let quiet = HeartbeatRunResult::Skipped(SkipReason::QuietHours);
        assert_eq!(
            schedule
                .after_run(&HeartbeatReason::Manual, &quiet, t)
                .next_due_ms,
            t + interval
        );
        let disabled = HeartbeatRunResult::Skipped(SkipReason::Disabled);
        assert_eq!(schedule.after_run(&cron, &disabled, t), schedule);
    }

    #[test]
    fn an_interval_heartbeat_moves_to_the_next_phase_slot_whatever_its_outcome() {
        let schedule = HeartbeatSchedule {
            interval_ms: 300_000,
            phase_ms: 100_000,
            next_due_ms: 1_000_000_000,
        };
        for result in [
            HeartbeatRunResult::Ran { duration_ms: 1 },
            HeartbeatRunResult::Skipped(SkipReason::QuietHours),
            HeartbeatRunResult::Failed("boom".into()),
        ] {
            let next = schedule.after_run(&HeartbeatReason::Interval, &result, 1_000_050_000);
            assert_eq!(next.next_due_ms, 1_000_300_000, "{result:?}");
        }
    }

    #[test]
    fn a_busy_lane_keeps_the_schedule_and_retries_a_second_later() {
        // Spec §6 vector 12 (schedule side): not advanced, retried after ≥ 1 s.
        let schedule = HeartbeatSchedule::new("seed", "main", 30 * MINUTE, 0);
        let busy = HeartbeatRunResult::Skipped(SkipReason::RequestsInFlight);
        for reason in [HeartbeatReason::Interval, HeartbeatReason::Manual] {
            assert_eq!(schedule.after_run(&reason, &busy, 12 * HOUR), schedule);
        }
        assert_eq!(retry_delay_ms(&busy), Some(1_000));
        assert_eq!(
            retry_delay_ms(&HeartbeatRunResult::Failed("x".into())),
            Some(1_000)
        );
        assert_eq!(
            retry_delay_ms(&HeartbeatRunResult::Ran { duration_ms: 5 }),
            None
        );
        assert_eq!(
            retry_delay_ms(&HeartbeatRunResult::Skipped(SkipReason::QuietHours)),
            None
        );
    }

    #[test]
    fn a_reload_keeps_a_future_due_time_when_interval_and_phase_are_unchanged() {
        let interval = 30 * MINUTE;
        let previous = HeartbeatSchedule::new("seed", "main", interval, 0);
        let before_due = previous.next_due_ms - 1;
        assert_eq!(
            HeartbeatSchedule::reconcile(Some(&previous), "seed", "main", interval, before_due),
            previous
        );
        // Due time passed, interval changed, or a new seed: start over.
        let at_due = previous.next_due_ms;
        let replanned =
            HeartbeatSchedule::reconcile(Some(&previous), "seed", "main", interval, at_due);
        assert!(replanned.next_due_ms > at_due);
        let longer = HeartbeatSchedule::reconcile(Some(&previous), "seed", "main", HOUR, 0);
        assert_eq!(longer.interval_ms, HOUR);
        assert_eq!(
            HeartbeatSchedule::reconcile(None, "seed", "main", interval, 0),
            previous
        );
        assert!(previous.is_due(previous.next_due_ms) && !previous.is_due(before_due));
    }

    #[test]
    fn active_hours_follow_the_spec_vectors() {
        // Spec §6 vector 9, with the user's zone UTC.
        let utc = TimeZone::UTC;
        let day = window("08:00", "24:00", Some("user"));
        assert!(!is_within_active_hours(
            Some(&day),
            at("2026-03-02T07:00:00Z"),
            &utc
        ));
        assert!(is_within_active_hours(
            Some(&day),
            at("2026-03-02T08:00:00Z"),
            &utc
        ));
        assert!(is_within_active_hours(
            Some(&day),
            at("2026-03-02T23:59:00Z"),
            &utc
        ));

        let night = window("22:00", "06:00", Some("UTC"));
        assert!(is_within_active_hours(
            Some(&night),
            at("2026-03-02T23:00:00Z"),
            &utc
        ));
        assert!(is_within_active_hours(
            Some(&night),
            at("2026-03-02T05:30:00Z"),
            &utc
        ));
        assert!(!is_within_active_hours(
            Some(&night),
            at("2026-03-02T12:00:00Z"),
            &utc
        ));

        let office = window("09:00", "17:00", Some("America/New_York"));
        assert!(is_within_active_hours(
            Some(&office),
            at("2026-03-02T15:00:00Z"),
            &utc
        ));
        assert!(!is_within_active_hours(
            Some(&office),
            at("2026-03-02T23:30:00Z"),
            &utc
        ));

        let empty = window("08:00", "08:00", None);
        assert!(!is_within_active_hours(
            Some(&empty),
            at("2026-03-02T08:00:00Z"),
            &utc
        ));
        assert!(!is_within_active_hours(
            Some(&empty),
            at("2026-03-02T20:00:00Z"),
            &utc
        ));

        let noon = at("2026-03-02T03:00:00Z");
        for invalid in [window("bad", "17:00", None), window("09:00", "24:30", None)] {
            assert!(
                is_within_active_hours(Some(&invalid), noon, &utc),
                "{invalid:?}"
            );
        }

        // An unknown zone falls back to the user's zone (Berlin is UTC+1 in March).
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        let mars = window("09:00", "10:00", Some("Mars/Olympus"));
        let half_past_eight_utc = at("2026-03-02T08:30:00Z");
        let half_past_nine_utc = at("2026-03-02T09:30:00Z");
        assert!(is_within_active_hours(
            Some(&mars),
            half_past_eight_utc,
            &berlin
        ));
        assert!(!is_within_active_hours(
            Some(&mars),
            half_past_nine_utc,
            &berlin
        ));
        assert!(is_within_active_hours(
            Some(&mars),
            half_past_nine_utc,
            &utc
        ));
    }

    #[test]
    fn active_hours_edge_cases() {
        let utc = TimeZone::UTC;
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        let nine_utc = at("2026-03-02T09:00:00Z"); // 10:00 in Berlin
        assert!(is_within_active_hours(None, nine_utc, &utc));
        // Unset zone is the user's zone; `local` is UTC whatever the user's zone.
        let ten_to_eleven = window("10:00", "11:00", None);
        assert!(is_within_active_hours(
            Some(&ten_to_eleven),
            nine_utc,
            &berlin
        ));
        let local = window("10:00", "11:00", Some("local"));
        assert!(!is_within_active_hours(Some(&local), nine_utc, &berlin));
        // Missing half, one-digit hours and `24:00` as a start are ignored windows.
        let missing_end = ActiveHoursConfig {
            start: Some("10:00".into()),
            ..Default::default()
        };
        assert!(is_within_active_hours(Some(&missing_end), nine_utc, &utc));
        assert!(is_within_active_hours(
            Some(&window("8:00", "09:00", None)),
            nine_utc,
            &utc
        ));
        assert!(is_within_active_hours(
            Some(&window("24:00", "08:00", None)),
            nine_utc,
            &utc
        ));
        // End is excluded.
        assert!(!is_within_active_hours(
            Some(&window("08:00", "09:00", None)),
            nine_utc,
            &utc
        ));
    }
}
