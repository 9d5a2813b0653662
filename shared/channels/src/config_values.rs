//! What every platform channel's config does with its values: a secret given inline or by the
//! name of an environment variable (never both; surrounding spaces trimmed, blank counts as
//! unset), and an API base URL (http or https, no trailing `/`). Each channel turns the
//! failures into its own `ConfigError`, naming its block.

/// Why a secret could not be looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SecretLookup {
    /// Neither the value nor its environment variable is given (or the value is blank).
    Missing,
    /// Both are given.
    Both,
    /// The named environment variable is unset or blank.
    EnvUnset(String),
}

/// The secret given inline or through `env_name`; `Ok(None)` when neither is given.
pub(crate) fn optional_secret(
    literal: Option<&str>,
    env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, SecretLookup> {
    let present = |value: String| {
        let value = value.trim();
        (!value.is_empty()).then(|| value.to_owned())
    };
    match (literal, env_name) {
        (Some(_), Some(_)) => Err(SecretLookup::Both),
        (None, None) => Ok(None),
        (Some(value), None) => present(value.to_owned())
            .map(Some)
            .ok_or(SecretLookup::Missing),
        (None, Some(var)) => env(var)
            .and_then(present)
            .map(Some)
            .ok_or_else(|| SecretLookup::EnvUnset(var.to_owned())),
    }
}

/// The secret given inline or through `env_name`; one of them is required.
pub(crate) fn required_secret(
    literal: Option<&str>,
    env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SecretLookup> {
    optional_secret(literal, env_name, env)?.ok_or(SecretLookup::Missing)
}

/// `configured` (else `default`) trimmed of spaces and trailing `/`; `Err` with the reason
/// when it is not an http(s) URL.
pub(crate) fn api_base_url(configured: Option<&str>, default: &str) -> Result<String, String> {
    let url = configured
        .unwrap_or(default)
        .trim()
        .trim_end_matches('/')
        .to_owned();
    if (url.starts_with("https://") || url.starts_with("http://"))
        && !url.contains(char::is_whitespace)
    {
        Ok(url)
    } else {
        Err(format!("apiBaseUrl {url:?} is not an http(s) URL"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some(" from-env ".to_owned()),
            "BLANK" => Some("  ".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn a_secret_comes_inline_or_from_the_environment_never_both() {
        assert_eq!(required_secret(Some(" s "), None, &env), Ok("s".to_owned()));
        assert_eq!(
            required_secret(None, Some("SET"), &env),
            Ok("from-env".to_owned())
        );
        assert_eq!(
            required_secret(Some("s"), Some("SET"), &env),
            Err(SecretLookup::Both)
        );
        assert_eq!(
            required_secret(None, None, &env),
            Err(SecretLookup::Missing)
        );
        assert_eq!(
            required_secret(Some(" "), None, &env),
            Err(SecretLookup::Missing)
        );
        assert_eq!(
            required_secret(None, Some("BLANK"), &env),
            Err(SecretLookup::EnvUnset("BLANK".to_owned()))
        );
        assert_eq!(optional_secret(None, None, &env), Ok(None));
    }

    #[test]
    fn api_base_urls_must_be_http_and_lose_their_trailing_slash() {
        assert_eq!(
            api_base_url(None, "https://api.example/"),
            Ok("https://api.example".to_owned())
        );
        assert_eq!(
            api_base_url(Some(" http://127.0.0.1:9/x/ "), "https://d"),
            Ok("http://127.0.0.1:9/x".to_owned())
        );
        assert!(api_base_url(Some("ftp://x"), "https://d").is_err());
        assert!(api_base_url(Some("https://a b"), "https://d").is_err());
    }
}
