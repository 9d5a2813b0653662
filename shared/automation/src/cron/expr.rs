//! Cron expressions: parsing with `croner` and finding occurrences in an IANA time zone.
//!
//! croner (the Rust port of the JS library OpenClaw schedules with) searches on civil time and
//! reaches a date library through its `CronDateTime` trait. Its bundled `jiff` support is for
//! jiff 0.2, while clawless uses jiff 1.x, so this module implements that trait for a jiff 1.x
//! zoned date-time of its own. It is the only place that knows croner's types: everything
//! else passes epoch milliseconds and a [`TimeZone`].
//!
//! Expressions have 5 fields, or 6 with leading seconds (no year field). When both
//! day-of-month and day-of-week are restricted they combine with OR, as in Vixie cron and
//! croner's default; a `+` before the day-of-week field asks for AND.

use std::cmp::Ordering;

use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use croner::{CivilDate, CivilDateTime, CivilTime, Cron, CronDateTime, Resolution, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, ZonedDateTime};

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    cron: Cron,
}

/// Why an expression was refused, in croner's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronExprError(String);

impl CronExpr {
    /// Parses a 5- or 6-field expression (croner syntax: ranges, steps, names, `L`, `W`,
    /// `#`, `?`, `@daily`-style nicknames).
    pub fn parse(expr: &str) -> Result<Self, CronExprError> {
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        parser
            .parse(expr)
            .map(|cron| Self { cron })
            .map_err(|error| CronExprError(error.to_string()))
    }

    /// The first occurrence strictly after `after_ms` (occurrences fall on whole seconds), or
    /// `None` if the expression never matches again.
    pub fn next_after(&self, after_ms: u64, tz: &TimeZone) -> Result<Option<u64>, CronExprError> {
        let found = self.search(after_ms, tz, Search::NextAfter)?;
        if found.is_none_or(|next| next > after_ms) {
            return Ok(found);
        }
        // The JS library once returned occurrences at or before the start; OpenClaw then
        // retries from the next whole second, then from the next UTC midnight. croner-rust
        // has not been seen doing this, but the guard is cheap and keeps the contract.
        let retries = [
            after_ms - after_ms % 1000 + 1000,
            after_ms - after_ms % DAY_MS + DAY_MS,
        ];
        for start in retries {
            let found = self.search(start, tz, Search::NextFrom)?;
            if found.is_none_or(|next| next > after_ms) {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The last occurrence at or before `at_ms`, or `None` if there is none.
    pub fn previous_at_or_before(
        &self, at_ms: u64, tz: &TimeZone,
    ) -> Result<Option<u64>, CronExprError> {
        self.search(at_ms, tz, Search::PreviousFrom)
    }

    fn search(
        &self, from_ms: u64, tz: &TimeZone, search: Search,
    ) -> Result<Option<u64>, CronExprError> {
        let Some(start) = i64::try_from(from_ms)
            .ok()
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        else {
            return Ok(None);
        };
        let start = Zoned(start.to_zoned_datetime(tz.clone()));
        let found = match search {
            Search::NextAfter => self.cron.find_next_occurrence(&start, false),
            Search::NextFrom => self.cron.find_next_occurrence(&start, true),
            Search::PreviousFrom => self.cron.find_previous_occurrence(&start, true),
        };
        match found {
            Ok(found) => Ok(u64::try_from(found.0.timestamp().as_millisecond()).ok()),
            // croner gives up after a bounded search: the expression does not match again
            // (e.g. `0 0 30 2 *`), or not within the years jiff can represent.
            Err(CronError::TimeSearchLimitExceeded | CronError::InvalidDate) => Ok(None),
            Err(error) => Err(CronExprError(error.to_string())),
        }
    }
}

/// Which way [`CronExpr::search`] looks from its start (croner works in whole seconds).
#[derive(Debug, Clone, Copy)]
enum Search {
    /// The first occurrence after the start's second.
    NextAfter,
    /// The first occurrence at or after the start.
    NextFrom,
    /// The last occurrence at or before the start.
    PreviousFrom,
}

const DAY_MS: u64 = 86_400_000;

/// True for expressions that fire at the top of every (or every n-th) hour: 5 fields with
/// minute `0` and an hour field containing `*`, or 6 fields with second `0`, minute `0`
/// and such an hour field. Such jobs get a default stagger, so that many agents' hourly
/// jobs do not all start in the same second.
pub fn is_recurring_top_of_hour(expr: &str) -> bool {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    match fields.as_slice() {
        [minute, hour, _, _, _] => *minute == "0" && hour.contains('*'),
        [second, minute, hour, _, _, _] => *second == "0" && *minute == "0" && hour.contains('*'),
        _ => false,
    }
}

/// A jiff 1.x zoned date-time that croner can search over.
#[derive(Debug, Clone)]
struct Zoned(ZonedDateTime);

impl CronDateTime for Zoned {
    fn to_civil(&self) -> CivilDateTime {
        let dt = self.0.datetime();
        // jiff keeps every part in range, so croner's unchecked constructors are sound here.
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(
                i32::from(dt.year()),
                small(dt.month()),
                small(dt.day()),
            ),
            CivilTime::from_parts_unchecked(
                small(dt.hour()),
                small(dt.minute()),
                small(dt.second()),
            ),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        Weekday::from_days_from_sunday(small(self.0.weekday().to_sunday_zero_offset()))
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> Result<Resolution<Self>, CronError> {
        let year = i16::try_from(civil.year()).map_err(|_| CronError::InvalidDate)?;
        let part = |value: u32| i8::try_from(value).map_err(|_| CronError::InvalidDate);
        let dt = jiff::civil::DateTime::new(
            year,
            part(civil.month())?,
            part(civil.day())?,
            part(civil.hour())?,
            part(civil.minute())?,
            part(civil.second())?,
            0,
        )
        .map_err(|_| CronError::InvalidDate)?;
        let ambiguous = self.0.time_zone().to_ambiguous_zoned_datetime(dt);
        let invalid = |_| CronError::InvalidTime;
        Ok(match ambiguous.offset() {
            AmbiguousOffset::Unambiguous { .. } => {
                Resolution::Single(Zoned(ambiguous.unambiguous().map_err(invalid)?))
            }
            AmbiguousOffset::Fold { .. } => Resolution::Ambiguous(
                Zoned(ambiguous.clone().earlier().map_err(invalid)?),
                Zoned(ambiguous.later().map_err(invalid)?),
            ),
            AmbiguousOffset::Gap { .. } => Resolution::Gap,
        })
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0
            .checked_add(SignedDuration::from_secs(seconds))
            .ok()
            .map(Zoned)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.timestamp().cmp(&other.0.timestamp())
    }
}

/// A calendar part that jiff guarantees to be small and non-negative.
fn small(value: i8) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_base::time::parse_time_zone;

    fn at(instant: &str) -> u64 {
        let ts: Timestamp = instant.parse().expect("valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    fn zone(name: &str) -> TimeZone {
        parse_time_zone(name).expect("known zone")
    }

    fn next(expr: &str, tz: &str, from: &str) -> u64 {
        CronExpr::parse(expr)
            .expect("valid expression")
            .next_after(at(from), &zone(tz))
            .expect("search")
            .expect("an occurrence")
    }

    #[test]
    fn weekly_expression_follows_the_zone() {
        // Vector 25: Wednesday 09:00 in Los Angeles (PST, UTC-8) is 17:00Z.
        assert_eq!(
            next("0 9 * * 3", "America/Los_Angeles", "2025-12-13T00:00:00Z"),
            at("2025-12-17T17:00:00Z")
        );
        // Vector 25: 08:00 in Shanghai (UTC+8) is midnight UTC.
        assert_eq!(
            next("0 8 * * *", "Asia/Shanghai", "2026-03-01T00:00:00Z"),
            at("2026-03-02T00:00:00Z")
        );
    }

    #[test]
    fn day_of_month_and_day_of_week_combine_with_or() {
        // Vector 25: `0 9 15 * 1` fires on the 15th and on every Monday.
        let expr = CronExpr::parse("0 9 15 * 1").expect("valid");
        let utc = TimeZone::UTC;
        let mut fires = Vec::new();
        let mut cursor = at("2026-06-01T00:00:00Z"); // a Monday
        for _ in 0..6 {
            cursor = expr
                .next_after(cursor, &utc)
                .expect("search")
                .expect("next");
            fires.push(clawless_base::time::rfc3339_utc(cursor));
        }
        assert_eq!(
            fires,
            [
                "2026-06-01T09:00:00Z",
                "2026-06-08T09:00:00Z",
                "2026-06-15T09:00:00Z", // a Monday and the 15th
                "2026-06-22T09:00:00Z",
                "2026-06-29T09:00:00Z",
                "2026-07-06T09:00:00Z",
            ]
        );
        // `+` asks for both: the 15th only when it is a Monday (next: February 2027).
        let and = CronExpr::parse("0 9 15 * +1").expect("valid");
        assert_eq!(
            and.next_after(at("2026-06-16T00:00:00Z"), &utc)
                .expect("search"),
            Some(at("2027-02-15T09:00:00Z"))
        );
    }

    #[test]
    fn six_fields_have_leading_seconds_and_seven_are_refused() {
        assert_eq!(
            next("30 0 * * * *", "UTC", "2026-01-01T10:00:31Z"),
            at("2026-01-01T11:00:30Z")
        );
        assert!(CronExpr::parse("0 0 * * * * 2027").is_err());
        assert!(CronExpr::parse("0 * *").is_err());
        assert!(CronExpr::parse("61 * * * *").is_err());
        assert!(CronExpr::parse("").is_err());
    }

    #[test]
    fn next_is_strictly_after_and_ignores_milliseconds() {
        let expr = CronExpr::parse("0 * * * *").expect("valid");
        let utc = TimeZone::UTC;
        let slot = at("2026-01-01T10:00:00Z");
        assert_eq!(
            expr.next_after(slot, &utc).expect("ok"),
            Some(slot + 3_600_000)
        );
        assert_eq!(expr.next_after(slot - 1, &utc).expect("ok"), Some(slot));
        assert_eq!(
            expr.next_after(slot + 500, &utc).expect("ok"),
            Some(slot + 3_600_000)
        );
        assert_eq!(
            expr.previous_at_or_before(slot + 500, &utc).expect("ok"),
            Some(slot)
        );
        assert_eq!(
            expr.previous_at_or_before(slot - 1, &utc).expect("ok"),
            Some(slot - 3_600_000)
        );
    }

    #[test]
    fn dst_gaps_fire_at_the_end_of_the_gap_and_folds_fire_once() {
        // New York skipped 02:00-03:00 on 2026-03-08: a 02:30 job fires when the gap ends,
        // 03:00 EDT (croner's behaviour; EventBridge cron would skip the day instead).
        let ny = zone("America/New_York");
        let expr = CronExpr::parse("30 2 * * *").expect("valid");
        assert_eq!(
            expr.next_after(at("2026-03-08T05:00:00Z"), &ny)
                .expect("ok"),
            Some(at("2026-03-08T07:00:00Z"))
        );
        // 01:30 happened twice on 2026-11-01; the job fires once that day.
        let fold = CronExpr::parse("30 1 * * *").expect("valid");
        let first = fold
            .next_after(at("2026-11-01T04:00:00Z"), &ny)
            .expect("ok")
            .expect("next");
        assert_eq!(first, at("2026-11-01T05:30:00Z"));
        let second = fold.next_after(first, &ny).expect("ok").expect("next");
        assert_eq!(second, at("2026-11-02T06:30:00Z"));
    }

    #[test]
    fn croner_extensions_work_through_the_adapter() {
        // Last day of the month, last Friday, second Tuesday, nearest weekday, nicknames.
        assert_eq!(
            next("0 0 L * *", "UTC", "2026-02-10T00:00:00Z"),
            at("2026-02-28T00:00:00Z")
        );
        assert_eq!(
            next("0 9 * * 5#L", "UTC", "2026-02-01T00:00:00Z"),
            at("2026-02-27T09:00:00Z")
        );
        assert_eq!(
            next("0 9 * * TUE#2", "UTC", "2026-02-01T00:00:00Z"),
            at("2026-02-10T09:00:00Z")
        );
        // The 15th of August 2026 is a Saturday: 15W fires on Friday the 14th.
        assert_eq!(
            next("0 9 15W * *", "UTC", "2026-08-01T00:00:00Z"),
            at("2026-08-14T09:00:00Z")
        );
        assert_eq!(
            next("@daily", "UTC", "2026-02-01T10:00:00Z"),
            at("2026-02-02T00:00:00Z")
        );
        assert_eq!(
            next("0 9 ? * 7", "UTC", "2026-02-01T10:00:00Z"),
            at("2026-02-08T09:00:00Z")
        );
    }

    #[test]
    fn impossible_dates_never_match() {
        let expr = CronExpr::parse("0 0 30 2 *").expect("parses");
        assert_eq!(
            expr.next_after(at("2026-01-01T00:00:00Z"), &TimeZone::UTC)
                .expect("ok"),
            None
        );
    }

    #[test]
    fn top_of_hour_detection() {
        // Vector 19.
        assert!(is_recurring_top_of_hour("0 * * * *"));
        assert!(is_recurring_top_of_hour("0 */2 * * *"));
        assert!(is_recurring_top_of_hour("0 0 * * * *"));
        assert!(!is_recurring_top_of_hour("0 9 * * *"));
        assert!(!is_recurring_top_of_hour("5 * * * *"));
        assert!(!is_recurring_top_of_hour("30 0 * * * *"));
        assert!(!is_recurring_top_of_hour("@hourly"));
    }
}
