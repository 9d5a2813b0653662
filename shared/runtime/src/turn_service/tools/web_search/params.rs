//! `web_search`'s arguments as the model sends them, read into [`SearchParams`] (camelCase or
//! snake_case keys, strings trimmed, blanks dropped), and the checks every provider shares:
//! the time filters and the soft "not supported by this provider" answers.

use serde_json::{Value, json};

use crate::tools_section::web::SearchProviderId;

/// Results per call at most, whatever the model or the config asks.
pub(super) const MAX_COUNT: u32 = 10;

/// A call's arguments, normalised.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct SearchParams {
    pub query: String,
    /// Clamped to 1–10.
    pub count: u32,
    pub country: Option<String>,
    /// `language`, or Brave's `search_lang`.
    pub language: Option<String>,
    pub ui_lang: Option<String>,
    pub freshness: Option<String>,
    pub date_after: Option<String>,
    pub date_before: Option<String>,
    pub domain_filter: Vec<String>,
    pub max_tokens: Option<u64>,
    pub max_tokens_per_page: Option<u64>,
}

impl SearchParams {
    /// Reads `input`; `default_count` applies when `count` is absent. `Err` is the message of
    /// a hard error (a missing query, a value of the wrong type).
    pub(super) fn read(input: &Value, default_count: u32) -> Result<Self, String> {
        let query = string(input, &["query"])?.ok_or_else(|| "query required".to_owned())?;
        let count = match number(input, &["count"])? {
            Some(count) => clamp_count(count),
            None => default_count.clamp(1, MAX_COUNT),
        };
        Ok(Self {
            query,
            count,
            country: string(input, &["country"])?,
            language: string(input, &["language", "search_lang", "searchLang"])?,
            ui_lang: string(input, &["ui_lang", "uiLang"])?,
            freshness: string(input, &["freshness"])?,
            date_after: string(input, &["date_after", "dateAfter"])?,
            date_before: string(input, &["date_before", "dateBefore"])?,
            domain_filter: strings(input, &["domain_filter", "domainFilter"])?,
            max_tokens: number(input, &["max_tokens", "maxTokens"])?.map(|n| n.max(1.0) as u64),
            max_tokens_per_page: number(input, &["max_tokens_per_page", "maxTokensPerPage"])?
                .map(|n| n.max(1.0) as u64),
        })
    }

    /// True when a date range is asked for.
    pub(super) fn has_dates(&self) -> bool {
        self.date_after.is_some() || self.date_before.is_some()
    }
}

/// `count` floored and clamped to 1–10.
pub(super) fn clamp_count(count: f64) -> u32 {
    if count.is_nan() {
        return 1;
    }
    count.floor().clamp(1.0, f64::from(MAX_COUNT)) as u32
}

/// A soft error: returned to the model as a successful result it can act on.
pub(super) fn soft(error: &str, message: impl Into<String>) -> Value {
    json!({ "error": error, "message": message.into() })
}

/// A filter some providers support and others do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Filter {
    Country,
    Language,
    Freshness,
    Dates,
    Domains,
}

impl Filter {
    fn code(self) -> &'static str {
        match self {
            Self::Country => "unsupported_country",
            Self::Language => "unsupported_language",
            Self::Freshness => "unsupported_freshness",
            Self::Dates => "unsupported_date_filter",
            Self::Domains => "unsupported_domain_filter",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Country => "country",
            Self::Language => "language",
            Self::Freshness => "freshness",
            Self::Dates => "date",
            Self::Domains => "domain",
        }
    }

    /// The providers that support it, as the message names them.
    fn supported_by(self) -> &'static str {
        match self {
            Self::Country | Self::Dates => "Brave and Perplexity",
            Self::Language | Self::Freshness => "Brave, Perplexity and SearXNG",
            Self::Domains => "Perplexity",
        }
    }

    fn present(self, params: &SearchParams) -> bool {
        match self {
            Self::Country => params.country.is_some(),
            Self::Language => params.language.is_some(),
            Self::Freshness => params.freshness.is_some(),
            Self::Dates => params.has_dates(),
            Self::Domains => !params.domain_filter.is_empty(),
        }
    }
}

/// The soft error for the first of `unsupported` that `params` uses, if any.
pub(super) fn refuse_unsupported(
    params: &SearchParams, provider: SearchProviderId, unsupported: &[Filter],
) -> Result<(), Value> {
    match unsupported.iter().find(|filter| filter.present(params)) {
        None => Ok(()),
        Some(filter) => Err(soft(
            filter.code(),
            format!(
                "{noun} filtering is not supported by the {provider} provider. Only {list} support {noun} filtering.",
                noun = filter.noun(),
                provider = provider.as_str(),
                list = filter.supported_by(),
            ),
        )),
    }
}

/// A freshness window, provider-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Freshness {
    Day,
    Week,
    Month,
    Year,
}

impl Freshness {
    /// `day|week|month|year` or Brave's `pd|pw|pm|py`, any case.
    pub(super) fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "day" | "pd" => Some(Self::Day),
            "week" | "pw" => Some(Self::Week),
            "month" | "pm" => Some(Self::Month),
            "year" | "py" => Some(Self::Year),
            _ => None,
        }
    }

    pub(super) fn word(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }
}

/// The soft error for a bad freshness value.
pub(super) fn invalid_freshness() -> Value {
    soft(
        "invalid_freshness",
        "freshness must be day, week, month, or year.",
    )
}

/// A validated date range: each bound `YYYY-MM-DD`, `after` not later than `before`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct DateRange {
    pub after: Option<String>,
    pub before: Option<String>,
}

/// Checks the time filters: freshness and dates are exclusive, dates are `YYYY-MM-DD` (or
/// `M/D/YYYY`), and `date_after` comes first. Returns the range in `YYYY-MM-DD`.
pub(super) fn check_time_filters(params: &SearchParams) -> Result<DateRange, Value> {
    if params.freshness.is_some() && params.has_dates() {
        return Err(soft(
            "conflicting_time_filters",
            "freshness and date_after/date_before cannot be used together. Use either freshness \
             (day/week/month/year) or a date range (date_after/date_before), not both.",
        ));
    }
    let parse = |value: &Option<String>, name: &str| -> Result<Option<String>, Value> {
        value
            .as_deref()
            .map(|text| {
                iso_date(text).ok_or_else(|| {
                    soft("invalid_date", format!("{name} must be YYYY-MM-DD format."))
                })
            })
            .transpose()
    };
    let after = parse(&params.date_after, "date_after")?;
    let before = parse(&params.date_before, "date_before")?;
    if let (Some(after), Some(before)) = (&after, &before)
        && after > before
    {
        return Err(soft(
            "invalid_date_range",
            "date_after must be before date_before.",
        ));
    }
    Ok(DateRange { after, before })
}

/// `text` as a real calendar date `YYYY-MM-DD`, also from `M/D/YYYY`.
pub(super) fn iso_date(text: &str) -> Option<String> {
    let (year, month, day) = if let Some((m, rest)) = text.split_once('/') {
        let (d, y) = rest.split_once('/')?;
        (y, m, d)
    } else {
        let mut parts = text.splitn(3, '-');
        let year = parts.next()?;
        let month = parts.next()?;
        let day = parts.next()?;
        if year.len() != 4 || month.len() != 2 || day.len() != 2 {
            return None;
        }
        (year, month, day)
    };
    let all_digits =
        |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
    if !(all_digits(year) && all_digits(month) && all_digits(day)) || year.len() != 4 {
        return None;
    }
    let (year, month, day): (u32, u32, u32) =
        (year.parse().ok()?, month.parse().ok()?, day.parse().ok()?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days)
        .contains(&day)
        .then(|| format!("{year:04}-{month:02}-{day:02}"))
}

/// The UTC calendar date at `ms` since the epoch, `YYYY-MM-DD`.
pub(super) fn utc_date(ms: u64) -> String {
    clawless_base::time::rfc3339_utc(ms)
        .get(..10)
        .unwrap_or("1970-01-01")
        .to_owned()
}

fn string(input: &Value, names: &[&str]) -> Result<Option<String>, String> {
    for name in names {
        match input.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => {
                let text = text.trim();
                if !text.is_empty() {
                    return Ok(Some(text.to_owned()));
                }
            }
            Some(_) => return Err(format!("{name} must be a string")),
        }
    }
    Ok(None)
}

fn number(input: &Value, names: &[&str]) -> Result<Option<f64>, String> {
    for name in names {
        match input.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::Number(number)) => return Ok(number.as_f64()),
            Some(Value::String(text)) if text.trim().is_empty() => {}
            Some(Value::String(text)) => {
                return text
                    .trim()
                    .parse::<f64>()
                    .map(Some)
                    .map_err(|_| format!("{name} must be a number"));
            }
            Some(_) => return Err(format!("{name} must be a number")),
        }
    }
    Ok(None)
}

fn strings(input: &Value, names: &[&str]) -> Result<Vec<String>, String> {
    for name in names {
        match input.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                return items
                    .iter()
                    .map(|item| match item {
                        Value::String(text) => Ok(text.trim().to_owned()),
                        _ => Err(format!("{name} must be a list of strings")),
                    })
                    .filter(|item| item.as_ref().map_or(true, |text| !text.is_empty()))
                    .collect();
            }
            Some(Value::String(text)) if !text.trim().is_empty() => {
                return Ok(vec![text.trim().to_owned()]);
            }
            Some(Value::String(_)) => {}
            Some(_) => return Err(format!("{name} must be a list of strings")),
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_floored_and_clamped_and_defaults_to_the_config() {
        let read = |input: Value| SearchParams::read(&input, 5).expect("reads").count;
        assert_eq!(read(json!({"query": "q"})), 5);
        assert_eq!(read(json!({"query": "q", "count": 50})), 10);
        assert_eq!(read(json!({"query": "q", "count": 0})), 1);
        assert_eq!(read(json!({"query": "q", "count": 3.9})), 3);
        assert_eq!(read(json!({"query": "q", "count": "7"})), 7);
    }

    #[test]
    fn a_blank_query_is_a_hard_error() {
        assert_eq!(
            SearchParams::read(&json!({"query": "  "}), 5),
            Err("query required".to_owned())
        );
        assert_eq!(
            SearchParams::read(&json!({}), 5),
            Err("query required".to_owned())
        );
    }

    #[test]
    fn snake_and_camel_keys_are_both_read() {
        let params = SearchParams::read(
            &json!({"query": " rust ", "search_lang": "en", "dateAfter": "2024-01-01", "domain_filter": ["a.com", " "]}),
            5,
        )
        .expect("reads");
        assert_eq!(params.query, "rust");
        assert_eq!(params.language.as_deref(), Some("en"));
        assert_eq!(params.date_after.as_deref(), Some("2024-01-01"));
        assert_eq!(params.domain_filter, ["a.com"]);
    }

    #[test]
    fn time_filters_are_checked() {
        let params = |input: Value| SearchParams::read(&input, 5).expect("reads");
        let conflict = check_time_filters(&params(
            json!({"query": "q", "freshness": "week", "date_after": "2024-01-01"}),
        ))
        .expect_err("conflict");
        assert_eq!(conflict["error"], "conflicting_time_filters");
        let bad = check_time_filters(&params(json!({"query": "q", "date_before": "2024-02-30"})))
            .expect_err("no such day");
        assert_eq!(bad["message"], "date_before must be YYYY-MM-DD format.");
        let reversed = check_time_filters(&params(
            json!({"query": "q", "date_after": "2024-05-01", "date_before": "2024-01-01"}),
        ))
        .expect_err("reversed");
        assert_eq!(reversed["error"], "invalid_date_range");
        let range = check_time_filters(&params(
            json!({"query": "q", "date_after": "1/5/2024", "date_before": "2024-02-29"}),
        ))
        .expect("valid");
        assert_eq!(range.after.as_deref(), Some("2024-01-05"));
        assert_eq!(range.before.as_deref(), Some("2024-02-29"));
    }

    #[test]
    fn an_unsupported_filter_names_the_providers_that_have_it() {
        let params = SearchParams::read(&json!({"query": "x", "country": "DE"}), 5).expect("reads");
        let refusal = refuse_unsupported(&params, SearchProviderId::Gemini, &[Filter::Country])
            .expect_err("refused");
        assert_eq!(
            refusal,
            json!({"error": "unsupported_country", "message": "country filtering is not supported by the gemini provider. Only Brave and Perplexity support country filtering."})
        );
    }

    #[test]
    fn utc_dates_come_from_milliseconds() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(1_767_225_600_000), "2026-01-01");
    }
}
