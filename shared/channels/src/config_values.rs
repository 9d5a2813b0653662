//! What every platform channel's config does with its values: a secret given inline or by the
//! name of an environment variable (never both; surrounding spaces trimmed, blank counts as
//! unset), why such a secret could not be looked up ([`SecretError`], which each channel's
//! `ConfigError` wraps behind its block's name), secrets kept out of `Debug` output, and an API
//! base URL (http or https, no trailing `/`).

/// What a config's `Debug` output shows for a secret: that it is set, never its value.
pub(crate) const REDACTED: &str = "<redacted>";

/// [`REDACTED`] when the secret is given; `None` when it is not.
pub(crate) fn redacted(secret: Option<&String>) -> Option<&'static str> {
    secret.map(|_| REDACTED)
}

/// Why the secret of a config field could not be looked up. The field is given inline
/// (`botToken`) or by the name of an environment variable (`botTokenEnv`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Neither the value nor its environment variable is given (or the value is blank).
    #[error("set {field} or {field}Env")]
    Missing {
        /// The field, e.g. `botToken`.
        field: &'static str,
    },
    /// Both the value and its environment variable are given.
    #[error("set only one of {field} and {field}Env")]
    Both {
        /// The field, e.g. `botToken`.
        field: &'static str,
    },
    /// The named environment variable is unset or blank.
    #[error("environment variable {var} (named by {field}Env) is not set")]
    EnvUnset {
        /// The field, e.g. `botToken`.
        field: &'static str,
        /// The variable's name.
        var: String,
    },
}

/// The secret `field`, given inline (`literal`) or through the environment variable
/// `env_name` (`env` reads one); `Ok(None)` when neither is given.
pub(crate) fn optional_secret(
    field: &'static str, literal: Option<&str>, env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, SecretError> {
    let present = |value: String| {
        let value = value.trim();
        (!value.is_empty()).then(|| value.to_owned())
    };
    match (literal, env_name) {
        (Some(_), Some(_)) => Err(SecretError::Both { field }),
        (None, None) => Ok(None),
        (Some(value), None) => present(value.to_owned())
            .map(Some)
            .ok_or(SecretError::Missing { field }),
        (None, Some(var)) => {
            env(var)
                .and_then(present)
                .map(Some)
                .ok_or_else(|| SecretError::EnvUnset {
                    field,
                    var: var.to_owned(),
                })
        }
    }
}

/// The secret `field`, given inline or through `env_name`; one of them is required.
pub(crate) fn required_secret(
    field: &'static str, literal: Option<&str>, env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SecretError> {
    optional_secret(field, literal, env_name, env)?.ok_or(SecretError::Missing { field })
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
        let required = |literal, env_name| required_secret("token", literal, env_name, &env);
        assert_eq!(required(Some(" s "), None), Ok("s".to_owned()));
        assert_eq!(required(None, Some("SET")), Ok("from-env".to_owned()));
        assert_eq!(
            required(Some("s"), Some("SET")),
            Err(SecretError::Both { field: "token" })
        );
        assert_eq!(
            required(None, None),
            Err(SecretError::Missing { field: "token" })
        );
        assert_eq!(
            required(Some(" "), None),
            Err(SecretError::Missing { field: "token" })
        );
        assert_eq!(
            required(None, Some("BLANK")),
            Err(SecretError::EnvUnset {
                field: "token",
                var: "BLANK".to_owned()
            })
        );
        assert_eq!(optional_secret("token", None, None, &env), Ok(None));
    }

    #[test]
    fn secret_errors_name_the_field_and_its_env_twin() {
        assert_eq!(
            SecretError::Missing { field: "botToken" }.to_string(),
            "set botToken or botTokenEnv"
        );
        assert_eq!(
            SecretError::EnvUnset {
                field: "botToken",
                var: "TG_TOKEN".to_owned()
            }
            .to_string(),
            "environment variable TG_TOKEN (named by botTokenEnv) is not set"
        );
        assert_eq!(redacted(Some(&"s3cret".to_owned())), Some(REDACTED));
        assert_eq!(redacted(None), None);
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
