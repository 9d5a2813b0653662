//! The operator's HTTP client for a deployed backend's operator routes (`/nodes/admin/…`,
//! `/cron/admin/call`), used by `clawless nodes --url URL …` and `clawless cron --url URL …`. Every call carries `Authorization: Bearer <admin token>`; the
//! token comes from `CLAWLESS_ADMIN_TOKEN` (never a flag, so it stays out of process lists and
//! shell history).
//!
//! Node views are passed through as the backend's JSON (`node_view`), so remote and local
//! output are printed by the same code.

use std::time::Duration;

use anyhow::{Context, bail};
use clawless_core::nodes::is_valid_node_id;
use serde::Deserialize;
use serde_json::Value;

/// Environment variable holding the operator's admin token.
pub(crate) const ADMIN_TOKEN_ENV: &str = "CLAWLESS_ADMIN_TOKEN";

/// A client for one backend's operator routes.
#[derive(Debug)]
pub(crate) struct AdminClient {
    http: reqwest::Client,
    base: reqwest::Url,
    authorization: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PairingCode {
    code: String,
}

#[derive(Deserialize)]
struct NodeList {
    nodes: Vec<Value>,
}

impl AdminClient {
    /// A client for `url`, with the token from [`ADMIN_TOKEN_ENV`].
    pub(crate) fn from_env(url: &str) -> anyhow::Result<Self> {
        let token = std::env::var(ADMIN_TOKEN_ENV)
            .ok()
            .filter(|token| !token.trim().is_empty());
        let Some(token) = token else {
            bail!(
                "{ADMIN_TOKEN_ENV} is not set: the backend's operator routes need the admin token \
                 (export {ADMIN_TOKEN_ENV}=…, as deployed)"
            );
        };
        Self::new(url, token.trim())
    }

    /// A client for `url` speaking with `token`.
    pub(crate) fn new(url: &str, token: &str) -> anyhow::Result<Self> {
        let base = reqwest::Url::parse(url).with_context(|| format!("invalid --url {url:?}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            bail!("invalid --url {url:?}: expected http(s)://host[:port][/path]");
        }
        let http = clawless_http::client_builder()
            .timeout(Duration::from_secs(30))
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base,
            authorization: format!("Bearer {token}"),
        })
    }

    /// `<base>/nodes/admin/<segments…>`, each segment escaped. Node ids are checked before
    /// (`.` and `..` would otherwise be dropped as segments).
    fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["nodes", "admin"])
                .extend(segments);
        }
        url
    }

    /// Sends one request; `Ok(None)` on 404.
    async fn call(
        &self, method: reqwest::Method, segments: &[&str],
    ) -> anyhow::Result<Option<String>> {
        let url = self.url(segments);
        let mut request = self.http.request(method.clone(), url.clone());
        if method == reqwest::Method::POST {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body("{}");
        }
        let (status, body) = self.send(request, &url).await?;
        match status.as_u16() {
            200..=299 => Ok(Some(body)),
            404 => Ok(None),
            _ => bail!("{method} {url} answered {status}: {}", body.trim()),
        }
    }

    /// Sends `request` (to `url`) with the admin token: the answer's status and body, or an
    /// error when the backend cannot be reached or refuses the token (401, 403).
    async fn send(
        &self, request: reqwest::RequestBuilder, url: &reqwest::Url,
    ) -> anyhow::Result<(reqwest::StatusCode, String)> {
        let response = request
            .header(reqwest::header::AUTHORIZATION, &self.authorization)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .with_context(|| format!("reading the answer of {url}"))?;
        if matches!(status.as_u16(), 401 | 403) {
            bail!(
                "the backend at {} refused the admin token ({ADMIN_TOKEN_ENV})",
                self.base
            );
        }
        Ok((status, body))
    }

    fn parse<T: for<'de> Deserialize<'de>>(body: &str, what: &str) -> anyhow::Result<T> {
        serde_json::from_str(body).with_context(|| format!("unexpected answer for {what}"))
    }

    /// A one-time pairing code.
    pub(crate) async fn create_pairing_code(&self) -> anyhow::Result<String> {
        let Some(body) = self.call(reqwest::Method::POST, &["pairing-codes"]).await? else {
            bail!("this backend has no operator routes (404 on /nodes/admin/pairing-codes)");
        };
        Ok(Self::parse::<PairingCode>(&body, "a pairing code")?.code)
    }

    /// Every paired node's view.
    pub(crate) async fn list(&self) -> anyhow::Result<Vec<Value>> {
        let Some(body) = self.call(reqwest::Method::GET, &["nodes"]).await? else {
            bail!("this backend has no operator routes (404 on /nodes/admin/nodes)");
        };
        Ok(Self::parse::<NodeList>(&body, "the node list")?.nodes)
    }

    /// One node's view; `None` when the backend knows no such node (or the id could not be
    /// one, so no request is sent for it).
    pub(crate) async fn show(&self, node_id: &str) -> anyhow::Result<Option<Value>> {
        if !is_valid_node_id(node_id) {
            return Ok(None);
        }
        match self.call(reqwest::Method::GET, &["nodes", node_id]).await? {
            Some(body) => Ok(Some(Self::parse(&body, "a node")?)),
            None => Ok(None),
        }
    }

    /// One `cron` call (the tool's JSON arguments) through `POST <base>/cron/admin/call`: the
    /// backend's answer, or its error sentence when it refused the call (400).
    pub(crate) async fn cron_call(&self, args: &Value) -> anyhow::Result<Value> {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["cron", "admin", "call"]);
        }
        let request = self.http.post(url.clone()).json(args);
        let (status, body) = self.send(request, &url).await?;
        match status.as_u16() {
            200..=299 => Self::parse(&body, "a cron call"),
            400 => {
                let refused: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                match refused.get("error").and_then(Value::as_str) {
                    Some(error) => bail!("{error}"),
                    None => bail!("POST {url} answered {status}: {}", body.trim()),
                }
            }
            404 => bail!("this backend has no cron operator route (404 on {url})"),
            _ => bail!("POST {url} answered {status}: {}", body.trim()),
        }
    }

    /// Revokes a node; `false` when the backend knows no such node (or the id could not be
    /// one, so no request is sent for it).
    pub(crate) async fn revoke(&self, node_id: &str) -> anyhow::Result<bool> {
        if !is_valid_node_id(node_id) {
            return Ok(false);
        }
        Ok(self
            .call(reqwest::Method::POST, &["nodes", node_id, "revoke"])
            .await?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_escaped_into_one_path_segment_under_the_base_path() {
        let client = AdminClient::new("https://api.example.com/prod/", "t").unwrap();
        assert_eq!(
            client.url(&["nodes", "a/b?c", "revoke"]).as_str(),
            "https://api.example.com/prod/nodes/admin/nodes/a%2Fb%3Fc/revoke"
        );
        let client = AdminClient::new("http://127.0.0.1:8787", "t").unwrap();
        assert_eq!(
            client.url(&["pairing-codes"]).as_str(),
            "http://127.0.0.1:8787/nodes/admin/pairing-codes"
        );
    }

    #[tokio::test]
    async fn ids_that_cannot_be_node_ids_are_unknown_without_a_request() {
        // Port 9 (discard) on loopback: any request would fail with an error, not `None`.
        let client = AdminClient::new("http://127.0.0.1:9", "t").unwrap();
        for id in ["..", ".", "a/b", "", "x?y"] {
            assert_eq!(client.show(id).await.unwrap(), None, "{id}");
            assert!(!client.revoke(id).await.unwrap(), "{id}");
        }
    }

    #[test]
    fn urls_that_are_not_http_are_refused() {
        for url in ["ftp://x", "not a url", "mailto:me@example.com"] {
            assert!(AdminClient::new(url, "t").is_err(), "{url}");
        }
    }
}
