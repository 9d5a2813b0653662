//! Perplexity's Search API: `POST <base>/search` with `Authorization: Bearer <key>`; ranked
//! `results[]` (title, url, snippet, date) become hits. Country, a two-letter language,
//! freshness, a date range (sent as `M/D/YYYY`), a domain allow- or denylist and content
//! budgets map onto the request body.

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::http::Failure;
use super::params::{Freshness, check_time_filters, invalid_freshness, soft};
use super::{Found, HitFields, ProviderCall, hits_in};

/// The public API.
pub(super) const DEFAULT_BASE_URL: &str = "https://api.perplexity.ai";
/// Domains a filter may name at most.
const MAX_DOMAINS: usize = 20;

pub(super) async fn search(call: &ProviderCall<'_>) -> Result<Found, Failure> {
    let params = call.params;
    let url = call.endpoint(DEFAULT_BASE_URL, "search")?;
    let range = check_time_filters(params)?;
    let mut body = Map::new();
    body.insert("query".to_owned(), json!(params.query));
    body.insert("max_results".to_owned(), json!(params.count));
    if let Some(country) = &params.country {
        body.insert("country".to_owned(), json!(country.to_ascii_uppercase()));
    }
    if let Some(language) = &params.language {
        let language = language.to_ascii_lowercase();
        if language.len() != 2 || !language.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(soft(
                "invalid_language",
                "language must be a two-letter ISO 639-1 code like 'en'.",
            )
            .into());
        }
        body.insert("search_language_filter".to_owned(), json!([language]));
    }
    if let Some(freshness) = &params.freshness {
        let window = Freshness::parse(freshness).ok_or_else(invalid_freshness)?;
        body.insert("search_recency_filter".to_owned(), json!(window.word()));
    }
    if let Some(after) = &range.after {
        body.insert("search_after_date_filter".to_owned(), json!(us_date(after)));
    }
    if let Some(before) = &range.before {
        body.insert(
            "search_before_date_filter".to_owned(),
            json!(us_date(before)),
        );
    }
    if !params.domain_filter.is_empty() {
        body.insert(
            "search_domain_filter".to_owned(),
            json!(domain_filter(&params.domain_filter)?),
        );
    }
    if let Some(max_tokens) = params.max_tokens {
        body.insert("max_tokens".to_owned(), json!(max_tokens.min(1_000_000)));
    }
    if let Some(per_page) = params.max_tokens_per_page {
        body.insert("max_tokens_per_page".to_owned(), json!(per_page));
    }
    let request = call
        .http
        .request(Method::POST, url)
        .bearer_auth(call.credential)
        .json(&Value::Object(body));
    let answer = call
        .http
        .json(request, "Perplexity Search API", Some(call.credential))
        .await?;
    let hits = hits_in(
        &answer,
        &HitFields {
            list: "/results",
            description: "snippet",
            published: &["date", "last_updated"],
        },
        usize::MAX,
    );
    Ok(Found::Results { hits })
}

/// `YYYY-MM-DD` as Perplexity's `M/D/YYYY`.
fn us_date(iso: &str) -> String {
    let mut parts = iso.split('-');
    let (Some(year), Some(month), Some(day)) = (parts.next(), parts.next(), parts.next()) else {
        return iso.to_owned();
    };
    format!(
        "{}/{}/{year}",
        month.trim_start_matches('0'),
        day.trim_start_matches('0')
    )
}

/// At most 20 domains, all allowed or all denied (`-` prefix).
fn domain_filter(domains: &[String]) -> Result<Vec<String>, Value> {
    let denied = domains
        .iter()
        .filter(|domain| domain.starts_with('-'))
        .count();
    if domains.len() > MAX_DOMAINS {
        return Err(soft(
            "invalid_domain_filter",
            format!("domain_filter may name at most {MAX_DOMAINS} domains."),
        ));
    }
    if denied != 0 && denied != domains.len() {
        return Err(soft(
            "invalid_domain_filter",
            "domain_filter must be all allowed domains or all denied ones ('-' prefix), not a mix.",
        ));
    }
    Ok(domains.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_sent_the_american_way() {
        assert_eq!(us_date("2024-01-05"), "1/5/2024");
        assert_eq!(us_date("2024-12-25"), "12/25/2024");
    }

    #[test]
    fn a_domain_filter_is_an_allowlist_or_a_denylist() {
        let domains = |list: &[&str]| list.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>();
        assert!(domain_filter(&domains(&["a.com", "b.org"])).is_ok());
        assert!(domain_filter(&domains(&["-a.com", "-b.org"])).is_ok());
        assert_eq!(
            domain_filter(&domains(&["a.com", "-b.org"])).expect_err("mixed")["error"],
            "invalid_domain_filter"
        );
        let many: Vec<String> = (0..21).map(|n| format!("d{n}.com")).collect();
        assert!(domain_filter(&many).is_err());
    }
}
