//! Short human-readable token counts for `/status`, `/compact` replies and similar one-liners
//! (spec §5): `999`, `1.5k`, `200k`, `1.2m`, and the `Context <used>/<window> (<pct>%)` label.
//!
//! All rounding is done on integers, halves rounding up, so the output never depends on how a
//! quotient happens to be represented as a binary float.

/// Formats a token count compactly.
///
/// - unknown (`None`) → `0`;
/// - below 1,000 → the plain integer (`999`);
/// - below 10,000 → thousands with one decimal (`1.0k`, `1.5k`, `9999` → `10.0k`);
/// - below 1,000,000 → whole thousands (`10k`, `200k`), unless that rounds to 1000k, which is
///   shown in millions instead (`999999` → `1.0m`);
/// - otherwise millions with one decimal (`1.2m`).
pub fn format_token_count(tokens: Option<u64>) -> String {
    let Some(tokens) = tokens else {
        return "0".to_owned();
    };
    if tokens >= 1_000_000 {
        return format_millions(tokens);
    }
    if tokens >= 10_000 {
        let thousands = round_div(tokens, 1_000);
        if thousands >= 1_000 {
            return format_millions(tokens);
        }
        return format!("{thousands}k");
    }
    if tokens >= 1_000 {
        return format!("{}k", one_decimal(round_div(tokens, 100)));
    }
    tokens.to_string()
}

/// The short context-usage label: `Context <total>/<window> (<pct>%)`.
///
/// The percentage is `100 · total / window` rounded to the nearest integer and capped at 999.
/// An unknown total gives `Context ?/<window>`; an unknown or zero window gives
/// `Context <total>/?` with no percentage (and `Context ?/?` when both are unknown).
pub fn format_context_usage_short(total: Option<u64>, window: Option<u64>) -> String {
    let window = window.filter(|&window| window > 0);
    let window_label = window.map_or_else(|| "?".to_owned(), |w| format_token_count(Some(w)));
    let Some(total) = total else {
        return format!("Context ?/{window_label}");
    };
    let total_label = format_token_count(Some(total));
    match window {
        Some(window) => {
            let percent = usage_percent(total, window);
            format!("Context {total_label}/{window_label} ({percent}%)")
        }
        None => format!("Context {total_label}/{window_label}"),
    }
}

/// Largest percentage [`format_context_usage_short`] shows.
const MAX_USAGE_PERCENT: u128 = 999;

/// `min(999, round(100 · total / window))`, in integers wide enough never to overflow.
fn usage_percent(total: u64, window: u64) -> u128 {
    let (total, window) = (u128::from(total), u128::from(window));
    // round(a / b) with halves up is floor((2a + b) / 2b).
    ((200 * total + window) / (2 * window)).min(MAX_USAGE_PERCENT)
}

/// `tokens` in millions with one decimal and an `m` suffix.
fn format_millions(tokens: u64) -> String {
    format!("{}m", one_decimal(round_div(tokens, 100_000)))
}

/// Renders a count of tenths as `<whole>.<tenth>`.
fn one_decimal(tenths: u64) -> String {
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// `value / divisor` rounded to the nearest integer, halves up.
fn round_div(value: u64, divisor: u64) -> u64 {
    value / divisor + u64::from(value % divisor >= divisor.div_ceil(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_match_spec_vector_49() {
        let cases = [
            (Some(999), "999"),
            (Some(1_000), "1.0k"),
            (Some(1_500), "1.5k"),
            (Some(9_999), "10.0k"),
            (Some(10_000), "10k"),
            (Some(200_000), "200k"),
            (Some(999_999), "1.0m"),
            (Some(1_234_567), "1.2m"),
            (None, "0"),
        ];
        for (tokens, expected) in cases {
            assert_eq!(format_token_count(tokens), expected, "tokens {tokens:?}");
        }
    }

    #[test]
    fn token_count_boundaries_round_halves_up() {
        let cases = [
            (Some(0), "0"),
            (Some(1_050), "1.1k"),
            (Some(1_149), "1.1k"),
            (Some(1_150), "1.2k"),
            (Some(10_499), "10k"),
            (Some(10_500), "11k"),
            (Some(999_499), "999k"),
            (Some(999_500), "1.0m"),
            (Some(1_000_000), "1.0m"),
            (Some(1_250_000), "1.3m"),
            (Some(12_345_678), "12.3m"),
            (Some(u64::MAX), "18446744073709.6m"),
        ];
        for (tokens, expected) in cases {
            assert_eq!(format_token_count(tokens), expected, "tokens {tokens:?}");
        }
    }

    #[test]
    fn context_usage_matches_spec_vector_50() {
        assert_eq!(
            format_context_usage_short(Some(12_345), Some(200_000)),
            "Context 12k/200k (6%)"
        );
        assert_eq!(
            format_context_usage_short(None, Some(200_000)),
            "Context ?/200k"
        );
        assert_eq!(
            format_context_usage_short(Some(5_000), None),
            "Context 5.0k/?"
        );
        assert_eq!(
            format_context_usage_short(Some(500_000), Some(200_000)),
            "Context 500k/200k (250%)"
        );
    }

    #[test]
    fn context_usage_caps_the_percentage_and_treats_a_zero_window_as_unknown() {
        assert_eq!(
            format_context_usage_short(Some(3_000_000), Some(1_000)),
            "Context 3.0m/1.0k (999%)"
        );
        assert_eq!(
            format_context_usage_short(Some(1), Some(200)),
            "Context 1/200 (1%)"
        );
        assert_eq!(
            format_context_usage_short(Some(22_000), Some(200_000)),
            "Context 22k/200k (11%)"
        );
        assert_eq!(format_context_usage_short(Some(5), Some(0)), "Context 5/?");
        assert_eq!(format_context_usage_short(None, None), "Context ?/?");
        assert_eq!(
            format_context_usage_short(Some(u64::MAX), Some(u64::MAX)),
            "Context 18446744073709.6m/18446744073709.6m (100%)"
        );
    }
}
