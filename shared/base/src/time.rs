//! Wall-clock time for people: RFC 3339 timestamps, the user's IANA time zone, local dates and
//! times of day, the `Current time:` line the model sees, and the daily reset boundary.
//!
//! Everything takes milliseconds since the Unix epoch (`u64`, as the rest of clawless stores
//! them) and does its calendar work with [`jiff`]. The IANA time zone database is compiled into
//! the binary (jiff's `tzdb-bundle-always`) and the host's `/usr/share/zoneinfo` is never read,
//! so a Lambda runtime without zoneinfo and a laptop give the same answers.
//!
//! Instants outside jiff's range (years -9999..=9999) saturate: a `u64` that large is not a
//! time anyone will ask about.

use jiff::Timestamp;
use jiff::civil::Date;

pub use jiff::tz::TimeZone;

/// A time zone name that is not in the IANA database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{name}`: expected an IANA name such as `Europe/Berlin` or `UTC`")]
pub struct UnknownTimeZone {
    /// The name as given.
    pub name: String,
}

/// Looks up an IANA time zone name (`Europe/Berlin`, `america/new_york`, `UTC`; case does not
/// matter). Blank names and names the database does not know are errors.
pub fn parse_time_zone(name: &str) -> Result<TimeZone, UnknownTimeZone> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(UnknownTimeZone {
            name: name.to_owned(),
        });
    }
    TimeZone::get(trimmed).map_err(|_| UnknownTimeZone {
        name: trimmed.to_owned(),
    })
}

/// The user's time zone from an optional setting (`agents.defaults.userTimezone`): UTC when
/// it is unset or blank, and UTC with a warning in the log when the name is unknown.
pub fn time_zone_or_utc(name: Option<&str>) -> TimeZone {
    match name.map(str::trim).filter(|name| !name.is_empty()) {
        None => TimeZone::UTC,
        Some(name) => parse_time_zone(name).unwrap_or_else(|error| {
            tracing::warn!(%error, "falling back to UTC");
            TimeZone::UTC
        }),
    }
}

/// The IANA name of a zone made by this module (`UTC` for UTC).
pub fn time_zone_name(tz: &TimeZone) -> &str {
    tz.iana_name().unwrap_or("UTC")
}

/// Formats milliseconds since the epoch as an RFC 3339 UTC timestamp with whole seconds:
/// `0` → `1970-01-01T00:00:00Z`.
pub fn rfc3339_utc(ms: u64) -> String {
    timestamp(ms - ms % 1000)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The calendar date (`YYYY-MM-DD`) at `ms` in `tz`.
pub fn local_date(ms: u64, tz: &TimeZone) -> String {
    tz.to_datetime(timestamp(ms)).date().to_string()
}

/// Minutes since local midnight (0..=1439) at `ms` in `tz`: the wall-clock `HH:MM` as a
/// number, for comparing against configured windows such as heartbeat active hours.
pub fn local_minute_of_day(ms: u64, tz: &TimeZone) -> u16 {
    let local = tz.to_datetime(timestamp(ms));
    // hour() is 0..=23 and minute() 0..=59, so the sum always fits.
    u16::try_from(i32::from(local.hour()) * 60 + i32::from(local.minute())).unwrap_or(0)
}

/// The local dates of the last `days` days in `tz`, newest first: today, yesterday, …
pub fn recent_local_dates(now_ms: u64, tz: &TimeZone, days: usize) -> Vec<String> {
    let mut dates = Vec::with_capacity(days);
    let mut date = Some(tz.to_datetime(timestamp(now_ms)).date());
    while dates.len() < days {
        let Some(day) = date else { break };
        dates.push(day.to_string());
        date = day.yesterday().ok();
    }
    dates
}

/// The line that tells the model what time it is, in the user's zone and in UTC:
///
/// `Current time: Thursday, November 26th, 2026 — 14:05 (Europe/Berlin) / 2026-11-26 13:05 UTC`
///
/// The local part is the English weekday, month name, day of the month with its ordinal
/// suffix, year and a 24-hour `HH:MM`; the UTC part is `YYYY-MM-DD HH:MM`.
pub fn current_time_line(ms: u64, tz: &TimeZone) -> String {
    let at = timestamp(ms);
    let local = at.to_zoned_datetime(tz.clone());
    let day = local.day();
    format!(
        "Current time: {} {}{}, {} — {:02}:{:02} ({}) / {} UTC",
        local.strftime("%A, %B"),
        day,
        ordinal_suffix(day),
        local.year(),
        local.hour(),
        local.minute(),
        time_zone_name(tz),
        at.strftime("%Y-%m-%d %H:%M"),
    )
}

/// The most recent daily boundary at or before `now_ms`: today at `at_hour:00` local time in
/// `tz`, or yesterday's when `now_ms` is earlier than today's. `at_hour` above 23 counts as 23.
///
/// On a day when `at_hour:00` does not exist (a DST gap) the boundary is the first instant
/// after the gap; when it happens twice (a fold) it is the first of the two.
pub fn daily_boundary_ms(now_ms: u64, at_hour: u8, tz: &TimeZone) -> u64 {
    let now = timestamp(now_ms);
    let today = tz.to_datetime(now).date();
    // A zone that skipped a whole day can put "yesterday at at_hour" after now; a few days back
    // is always enough.
    let mut date = Some(today);
    for _ in 0..4 {
        let Some(day) = date else { break };
        if let Some(boundary) = boundary_on(day, at_hour, tz).filter(|b| *b <= now) {
            return millis(boundary);
        }
        date = day.yesterday().ok();
    }
    0
}

/// The first daily boundary (`at_hour:00` local in `tz`, as in [`daily_boundary_ms`]) strictly
/// after `after_ms`: when a session started at `after_ms` first becomes due for its daily reset.
pub fn next_daily_boundary_ms(after_ms: u64, at_hour: u8, tz: &TimeZone) -> u64 {
    let after = timestamp(after_ms);
    let mut date = Some(tz.to_datetime(after).date());
    for _ in 0..4 {
        let Some(day) = date else { break };
        if let Some(boundary) = boundary_on(day, at_hour, tz).filter(|b| *b > after) {
            return millis(boundary);
        }
        date = day.tomorrow().ok();
    }
    u64::MAX
}

/// `date` at `at_hour:00` in `tz`, gaps and folds resolved the `compatible` way (later side of
/// a gap, earlier side of a fold).
fn boundary_on(date: Date, at_hour: u8, tz: &TimeZone) -> Option<Timestamp> {
    let hour = i8::try_from(at_hour.min(23)).unwrap_or(23);
    tz.to_ambiguous_timestamp(date.at(hour, 0, 0, 0))
        .compatible()
        .ok()
}

/// `ms` as a jiff timestamp, saturating beyond jiff's range.
fn timestamp(ms: u64) -> Timestamp {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::MAX)
}

/// A timestamp as milliseconds since the epoch; instants before the epoch become 0.
fn millis(at: Timestamp) -> u64 {
    u64::try_from(at.as_millisecond()).unwrap_or(0)
}

fn ordinal_suffix(day: i8) -> &'static str {
    match (day % 10, day % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// Parses a duration as OpenClaw's config does: a decimal number with a unit (`ms`, `s`, `m`,
/// `h`, `d`), several written together (`1h30m`), or a bare number in `default_unit_ms`.
/// Case and surrounding whitespace do not matter; anything else (`1h foo`, `-5m`, `1e3`,
/// `abc`, empty) is `None`. Fractions are rounded to the nearest millisecond (`1.5s` is 1500).
pub fn parse_duration_ms(text: &str, default_unit_ms: u64) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    if text.is_empty() {
        return None;
    }
    if let Some(number) = parse_decimal(&text) {
        return rounded_millis(number * default_unit_ms as f64);
    }
    let mut rest = text.as_str();
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value = parse_decimal(&rest[..number_len])?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit_ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * unit_ms;
    }
    rounded_millis(total)
}

/// Digits with at most one decimal point and at least one digit (`30`, `1.5`, `.5`); no
/// sign, no exponent.
fn parse_decimal(text: &str) -> Option<f64> {
    let valid = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && text.chars().filter(|c| *c == '.').count() <= 1
        && text.chars().any(|c| c.is_ascii_digit());
    if valid { text.parse().ok() } else { None }
}

fn rounded_millis(ms: f64) -> Option<u64> {
    // `as` saturates, so absurdly long durations become u64::MAX rather than wrapping.
    ms.is_finite().then(|| ms.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOUR: u64 = 3_600_000;
    const DAY: u64 = 24 * HOUR;

    fn zone(name: &str) -> TimeZone {
        parse_time_zone(name).expect("known zone")
    }

    /// Milliseconds of an RFC 3339 instant, parsed by jiff (not by the code under test).
    fn at(instant: &str) -> u64 {
        let ts: Timestamp = instant.parse().expect("valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    #[test]
    fn timestamps_format_as_utc_rfc3339() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_795_000_000_000), "2026-11-18T11:06:40Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn rfc3339_drops_milliseconds_and_saturates_far_future() {
        assert_eq!(rfc3339_utc(1_795_000_000_999), "2026-11-18T11:06:40Z");
        assert_eq!(rfc3339_utc(86_399_999), "1970-01-01T23:59:59Z");
        assert!(rfc3339_utc(u64::MAX).starts_with("9999-12-"));
    }

    #[test]
    fn time_zones_parse_by_iana_name_in_any_case() {
        assert_eq!(time_zone_name(&zone("Europe/Berlin")), "Europe/Berlin");
        assert_eq!(
            time_zone_name(&zone("america/new_york")),
            "America/New_York"
        );
        assert_eq!(time_zone_name(&zone(" UTC ")), "UTC");
        assert_eq!(
            parse_time_zone("Mars/Olympus_Mons"),
            Err(UnknownTimeZone {
                name: "Mars/Olympus_Mons".to_owned()
            })
        );
        assert!(parse_time_zone("  ").is_err());
        let message = parse_time_zone("Nowhere").unwrap_err().to_string();
        assert!(message.contains("`Nowhere`"), "{message}");
    }

    #[test]
    fn unset_blank_and_unknown_zones_fall_back_to_utc() {
        for name in [None, Some(""), Some("   "), Some("Not/AZone")] {
            assert_eq!(time_zone_name(&time_zone_or_utc(name)), "UTC", "{name:?}");
        }
        assert_eq!(
            time_zone_name(&time_zone_or_utc(Some("Asia/Tokyo"))),
            "Asia/Tokyo"
        );
    }

    #[test]
    fn local_date_follows_the_zone() {
        // 2026-11-26T23:30Z is already the 27th in Berlin and still the 26th in New York.
        let ms = at("2026-11-26T23:30:00Z");
        assert_eq!(local_date(ms, &TimeZone::UTC), "2026-11-26");
        assert_eq!(local_date(ms, &zone("Europe/Berlin")), "2026-11-27");
        assert_eq!(
            local_date(at("2026-11-27T03:00:00Z"), &zone("America/New_York")),
            "2026-11-26"
        );
    }

    #[test]
    fn minute_of_day_is_the_local_wall_clock() {
        let ms = at("2026-11-26T23:30:00Z");
        assert_eq!(local_minute_of_day(ms, &TimeZone::UTC), 23 * 60 + 30);
        // Berlin is UTC+1 in November: already 00:30 on the next day.
        assert_eq!(local_minute_of_day(ms, &zone("Europe/Berlin")), 30);
        assert_eq!(
            local_minute_of_day(at("2026-11-26T00:00:00Z"), &TimeZone::UTC),
            0
        );
    }

    #[test]
    fn recent_dates_count_back_across_month_and_year_ends() {
        let ms = at("2027-01-01T10:00:00Z");
        assert_eq!(
            recent_local_dates(ms, &TimeZone::UTC, 3),
            ["2027-01-01", "2026-12-31", "2026-12-30"]
        );
        assert!(recent_local_dates(ms, &TimeZone::UTC, 0).is_empty());
        // 09:00Z is still 23:00 on the 31st in Honolulu.
        assert_eq!(
            recent_local_dates(at("2027-01-01T09:00:00Z"), &zone("Pacific/Honolulu"), 1),
            ["2026-12-31"]
        );
    }

    #[test]
    fn current_time_line_shows_local_and_utc() {
        let ms = at("2026-11-26T13:05:42Z");
        assert_eq!(
            current_time_line(ms, &zone("Europe/Berlin")),
            "Current time: Thursday, November 26th, 2026 — 14:05 (Europe/Berlin) / 2026-11-26 13:05 UTC"
        );
        assert_eq!(
            current_time_line(ms, &TimeZone::UTC),
            "Current time: Thursday, November 26th, 2026 — 13:05 (UTC) / 2026-11-26 13:05 UTC"
        );
        // Across the date line the local day differs from the UTC one.
        assert_eq!(
            current_time_line(at("2026-03-01T20:00:00Z"), &zone("Pacific/Auckland")),
            "Current time: Monday, March 2nd, 2026 — 09:00 (Pacific/Auckland) / 2026-03-01 20:00 UTC"
        );
    }

    #[test]
    fn ordinal_suffixes() {
        let cases = [
            (1, "st"),
            (2, "nd"),
            (3, "rd"),
            (4, "th"),
            (11, "th"),
            (12, "th"),
            (13, "th"),
            (21, "st"),
            (22, "nd"),
            (23, "rd"),
            (30, "th"),
            (31, "st"),
        ];
        for (day, suffix) in cases {
            assert_eq!(ordinal_suffix(day), suffix, "{day}");
        }
    }

    #[test]
    fn daily_boundary_is_today_or_yesterday_at_the_hour() {
        let utc = TimeZone::UTC;
        // Spec §7 vectors 1 and 2, with UTC as the local zone.
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T05:00:00Z"), 4, &utc),
            at("2026-01-18T04:00:00Z")
        );
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T03:00:00Z"), 4, &utc),
            at("2026-01-17T04:00:00Z")
        );
        // Exactly at the hour is today's boundary.
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T04:00:00Z"), 4, &utc),
            at("2026-01-18T04:00:00Z")
        );
        // Hours above 23 count as 23.
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T05:00:00Z"), 99, &utc),
            at("2026-01-17T23:00:00Z")
        );
    }

    #[test]
    fn daily_boundary_uses_the_given_zone() {
        // 04:00 in Berlin (UTC+1 in January) is 03:00Z.
        let berlin = zone("Europe/Berlin");
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T03:30:00Z"), 4, &berlin),
            at("2026-01-18T03:00:00Z")
        );
        assert_eq!(
            daily_boundary_ms(at("2026-01-18T03:30:00Z"), 4, &TimeZone::UTC),
            at("2026-01-17T04:00:00Z")
        );
    }

    #[test]
    fn daily_boundary_in_a_dst_gap_is_the_end_of_the_gap() {
        // New York skipped 02:00-03:00 on 2026-03-08; 02:00 local resolves to 03:00 EDT = 07:00Z.
        let ny = zone("America/New_York");
        assert_eq!(
            daily_boundary_ms(at("2026-03-08T12:00:00Z"), 2, &ny),
            at("2026-03-08T07:00:00Z")
        );
        // Just before the gap it is still the day before's 02:00 EST.
        assert_eq!(
            daily_boundary_ms(at("2026-03-08T06:59:00Z"), 2, &ny),
            at("2026-03-07T07:00:00Z")
        );
    }

    #[test]
    fn daily_boundary_in_a_dst_fold_is_the_first_repetition() {
        // New York repeated 01:00-02:00 on 2026-11-01: first 01:00 EDT = 05:00Z, then EST = 06:00Z.
        let ny = zone("America/New_York");
        assert_eq!(
            daily_boundary_ms(at("2026-11-01T06:30:00Z"), 1, &ny),
            at("2026-11-01T05:00:00Z")
        );
    }

    #[test]
    fn next_boundary_is_strictly_after() {
        let utc = TimeZone::UTC;
        assert_eq!(
            next_daily_boundary_ms(at("2026-01-18T03:00:00Z"), 4, &utc),
            at("2026-01-18T04:00:00Z")
        );
        assert_eq!(
            next_daily_boundary_ms(at("2026-01-18T04:00:00Z"), 4, &utc),
            at("2026-01-19T04:00:00Z")
        );
    }

    #[test]
    fn a_zone_that_skipped_a_day_still_has_a_boundary_in_the_past() {
        // Samoa skipped 2011-12-30 entirely.
        let apia = zone("Pacific/Apia");
        let now = at("2011-12-30T12:00:00Z"); // 2011-12-31 01:00 local
        let boundary = daily_boundary_ms(now, 4, &apia);
        assert!(boundary <= now);
        assert!(now - boundary <= 2 * DAY, "{}", rfc3339_utc(boundary));
    }

    proptest! {
        #[test]
        fn boundaries_bracket_now(
            now in 0u64..4_102_444_800_000,
            hour in 0u8..24,
            zone_index in 0usize..4,
        ) {
            let names = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"];
            let tz = zone(names[zone_index]);
            let previous = daily_boundary_ms(now, hour, &tz);
            let next = next_daily_boundary_ms(now, hour, &tz);
            prop_assume!(previous > 0);
            prop_assert!(previous <= now && now < next);
            // Consecutive boundaries are a day apart, give or take a DST shift.
            prop_assert!(next - previous >= DAY - 2 * HOUR && next - previous <= DAY + 2 * HOUR);
            // A session started before the latest boundary is due by its next one, and the
            // other way around.
            let start = now.saturating_sub(now % (7 * HOUR));
            prop_assert_eq!(
                start < previous,
                next_daily_boundary_ms(start, hour, &tz) <= now
            );
        }
    }
}
