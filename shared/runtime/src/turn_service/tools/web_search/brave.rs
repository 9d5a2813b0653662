//! Brave Search: `GET <base>/res/v1/web/search` with the key in `X-Subscription-Token`;
//! `web.results[]` become hits. Country, search language, UI language, freshness and date
//! ranges map onto Brave's own parameters.

use reqwest::Method;
use serde_json::Value;

use super::http::Failure;
use super::params::{Freshness, check_time_filters, invalid_freshness, soft, utc_date};
use super::{Found, HitFields, ProviderCall, hits_in};

/// The public API.
pub(super) const DEFAULT_BASE_URL: &str = "https://api.search.brave.com";

/// The country codes Brave accepts; anything else searches `ALL`.
const COUNTRIES: [&str; 38] = [
    "AR", "AU", "AT", "BE", "BR", "CA", "CL", "DK", "FI", "FR", "DE", "GR", "HK", "IN", "ID", "IT",
    "JP", "KR", "MY", "MX", "NL", "NZ", "NO", "CN", "PL", "PT", "PH", "RU", "SA", "ZA", "ES", "SE",
    "CH", "TW", "TR", "GB", "US", "ALL",
];

/// Brave's search-language codes.
const SEARCH_LANGS: [&str; 51] = [
    "ar", "eu", "bn", "bg", "ca", "zh-hans", "zh-hant", "hr", "cs", "da", "nl", "en", "en-gb",
    "et", "fi", "fr", "gl", "de", "gu", "he", "hi", "hu", "is", "it", "jp", "kn", "ko", "lv", "lt",
    "ms", "ml", "mr", "nb", "pl", "pt-br", "pt-pt", "pa", "ro", "ru", "sr", "sk", "sl", "es", "sv",
    "ta", "te", "th", "tr", "uk", "vi", "el",
];

pub(super) async fn search(call: &ProviderCall<'_>) -> Result<Found, Failure> {
    let params = call.params;
    let mut url = call.endpoint(DEFAULT_BASE_URL, "res/v1/web/search")?;
    let range = check_time_filters(params)?;
    let freshness = match (&params.freshness, range.after, range.before) {
        (Some(text), _, _) => Some(brave_freshness(text).ok_or_else(invalid_freshness)?),
        (None, None, None) => None,
        (None, after, before) => Some(format!(
            "{}to{}",
            after.unwrap_or_else(|| "1970-01-01".to_owned()),
            before.unwrap_or_else(|| utc_date(call.now_ms))
        )),
    };
    let search_lang = params.language.as_deref().map(search_lang).transpose()?;
    let ui_lang = params.ui_lang.as_deref().map(ui_lang).transpose()?;
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("q", &params.query);
        query.append_pair("count", &params.count.to_string());
        if let Some(country) = &params.country {
            query.append_pair("country", &country_code(country));
        }
        if let Some(lang) = &search_lang {
            query.append_pair("search_lang", lang);
        }
        if let Some(lang) = &ui_lang {
            query.append_pair("ui_lang", lang);
        }
        if let Some(freshness) = &freshness {
            query.append_pair("freshness", freshness);
        }
    }
    let request = call
        .http
        .request(Method::GET, url)
        .header("Accept", "application/json")
        .header("X-Subscription-Token", call.credential);
    let answer = call
        .http
        .json(request, "Brave Search API", Some(call.credential))
        .await?;
    let hits = hits_in(
        &answer,
        &HitFields {
            list: "/web/results",
            description: "description",
            published: &["age"],
        },
        usize::MAX,
    );
    Ok(Found::Results { hits })
}

/// Upper-cased when Brave knows it, `ALL` otherwise.
pub(super) fn country_code(country: &str) -> String {
    let upper = country.trim().to_ascii_uppercase();
    if COUNTRIES.contains(&upper.as_str()) {
        upper
    } else {
        "ALL".to_owned()
    }
}

/// `day|week|month|year` or `pd|pw|pm|py` as Brave's shortcut, or a `YYYY-MM-DDtoYYYY-MM-DD`
/// range as is.
fn brave_freshness(text: &str) -> Option<String> {
    if let Some(window) = Freshness::parse(text) {
        return Some(
            match window {
                Freshness::Day => "pd",
                Freshness::Week => "pw",
                Freshness::Month => "pm",
                Freshness::Year => "py",
            }
            .to_owned(),
        );
    }
    let (after, before) = text.split_once("to")?;
    let after = super::params::iso_date(after)?;
    let before = super::params::iso_date(before)?;
    (after <= before).then(|| format!("{after}to{before}"))
}

/// A search language as Brave spells it (`ja` → `jp`, `zh` → `zh-hans`…).
fn search_lang(lang: &str) -> Result<String, Value> {
    let lower = lang.trim().to_ascii_lowercase().replace('_', "-");
    let canonical = match lower.as_str() {
        "ja" => "jp".to_owned(),
        "zh" | "zh-cn" | "zh-sg" => "zh-hans".to_owned(),
        "zh-hk" | "zh-tw" => "zh-hant".to_owned(),
        "en-us" => "en".to_owned(),
        "pt" => "pt-pt".to_owned(),
        other => other.to_owned(),
    };
    if SEARCH_LANGS.contains(&canonical.as_str()) {
        Ok(canonical)
    } else {
        Err(soft(
            "invalid_search_lang",
            format!(
                "search_lang {lang:?} is not a language Brave searches in (e.g. en, de, jp, zh-hans, pt-br)."
            ),
        ))
    }
}

/// `xx-YY`, normalised.
fn ui_lang(lang: &str) -> Result<String, Value> {
    let parts: Vec<&str> = lang.trim().split(['-', '_']).collect();
    match parts.as_slice() {
        [language, region]
            if language.len() == 2
                && region.len() == 2
                && language
                    .bytes()
                    .chain(region.bytes())
                    .all(|b| b.is_ascii_alphabetic()) =>
        {
            Ok(format!(
                "{}-{}",
                language.to_ascii_lowercase(),
                region.to_ascii_uppercase()
            ))
        }
        _ => Err(soft(
            "invalid_ui_lang",
            "ui_lang must be a language-region locale like 'en-US'.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_countries_search_everywhere() {
        assert_eq!(country_code("de"), "DE");
        assert_eq!(country_code("XX"), "ALL");
    }

    #[test]
    fn languages_are_brought_to_braves_codes() {
        assert_eq!(search_lang("ja"), Ok("jp".to_owned()));
        assert_eq!(search_lang("zh-TW"), Ok("zh-hant".to_owned()));
        assert_eq!(
            search_lang("klingon").expect_err("unknown")["error"],
            "invalid_search_lang"
        );
        assert_eq!(ui_lang("en_us"), Ok("en-US".to_owned()));
        assert_eq!(
            ui_lang("english").expect_err("bad")["error"],
            "invalid_ui_lang"
        );
    }

    #[test]
    fn freshness_words_become_shortcuts_and_ranges_are_kept() {
        assert_eq!(brave_freshness("week").as_deref(), Some("pw"));
        assert_eq!(brave_freshness("PD").as_deref(), Some("pd"));
        assert_eq!(
            brave_freshness("2024-01-01to2024-02-01").as_deref(),
            Some("2024-01-01to2024-02-01")
        );
        assert_eq!(brave_freshness("fortnight"), None);
    }
}
