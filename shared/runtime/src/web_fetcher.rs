//! [`HttpWebFetcher`]: the [`WebFetcher`] port over `reqwest`, enforcing the core's address
//! policy on every hop.
//!
//! Three places can lead a request to an internal address, and each is guarded:
//! - the URL itself (literal IPs in any notation): checked with
//!   [`check_fetch_url`] before each request, since literal IPs never reach a resolver;
//! - a host name that resolves to one (including DNS rebinding): every lookup goes through
//!   [`GuardedResolver`], which fails if *any* resolved address is refused;
//! - a redirect: reqwest's automatic redirects are off, each `Location` is followed by hand
//!   (at most [`MAX_REDIRECTS`]) and goes through both checks again.
//!
//! Proxies from the environment are ignored, so a lookup is never delegated to somewhere the
//! policy cannot see. The body is read chunk by chunk and cut at the caller's byte limit,
//! and the whole fetch, redirects included, runs under the caller's timeout.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::tools::web_fetch::{address_is_refused, check_fetch_url, hostname_is_refused};
use clawless_core::tools::{FetchError, FetchedPage, WebFetcher};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use url::{Host, Url};

/// Redirects followed at most before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// Time allowed to establish one connection (the caller's timeout bounds the whole fetch).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("clawless-web-fetch/", env!("CARGO_PKG_VERSION"));
const ACCEPT_VALUE: &str =
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5";

/// Failure to set up the fetcher.
#[derive(Debug, thiserror::Error)]
pub enum WebFetcherError {
    /// The HTTP client (TLS configuration) could not be built.
    #[error("could not build the HTTP client for web_fetch")]
    Client(#[source] reqwest::Error),
}

/// HTTP(S) fetcher for the `web_fetch` tool that refuses loopback, private, link-local and
/// metadata addresses for the URL, every redirect and every DNS answer.
#[derive(Debug, Clone)]
pub struct HttpWebFetcher {
    client: reqwest::Client,
    /// Exact `ip:port` pairs that literal-IP URLs may reach despite the policy (tests only).
    allowed: Arc<[SocketAddr]>,
}

/// The `web_fetch` tool's fetcher for a deployment or `clawless local`: [`HttpWebFetcher::new`],
/// or none (the tool is left out, with a warning) when its HTTP client cannot be built.
pub fn default_web_fetcher() -> Option<std::sync::Arc<dyn clawless_core::tools::WebFetcher>> {
    match HttpWebFetcher::new() {
        Ok(fetcher) => Some(std::sync::Arc::new(fetcher)),
        Err(err) => {
            tracing::warn!(error = %err, "web_fetch disabled");
            None
        }
    }
}

impl HttpWebFetcher {
    /// A fetcher that applies the address policy without exception.
    pub fn new() -> Result<Self, WebFetcherError> {
        Self::build(Vec::new())
    }

    /// A fetcher that may also reach these exact `ip:port` pairs when a URL names them as
    /// literal IPs, so tests can serve pages from loopback. Host names are still checked
    /// strictly (`http://localhost:<port>/` stays refused), as are all other ports.
    #[cfg(feature = "test-support")]
    pub fn with_allowed_test_addresses(
        allowed: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Self, WebFetcherError> {
        Self::build(allowed.into_iter().collect())
    }

    fn build(allowed: Vec<SocketAddr>) -> Result<Self, WebFetcherError> {
        let client = clawless_http::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver))
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(USER_AGENT)
            .build()
            .map_err(WebFetcherError::Client)?;
        Ok(Self {
            client,
            allowed: allowed.into(),
        })
    }

    fn is_allowed(&self, addr: SocketAddr) -> bool {
        self.allowed.contains(&addr)
    }

    /// The policy check for one hop, with the test allowance for literal IPs.
    fn check(&self, url: &Url) -> Result<(), FetchError> {
        let literal = match url.host() {
            Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        let allowed = literal
            .zip(url.port_or_known_default())
            .is_some_and(|(ip, port)| self.is_allowed(SocketAddr::new(ip, port)));
        if allowed && matches!(url.scheme(), "http" | "https") {
            return Ok(());
        }
        check_fetch_url(url)
    }

    async fn fetch_hops(&self, url: &str, max_bytes: usize) -> Result<FetchedPage, FetchError> {
        let mut current = Url::parse(url.trim())
            .map_err(|error| FetchError::InvalidUrl(format!("{url}: {error}")))?;
        for hop in 0..=MAX_REDIRECTS {
            self.check(&current)?;
            let response = self
                .client
                .get(current.clone())
                .header(ACCEPT, ACCEPT_VALUE)
                .send()
                .await
                .map_err(map_error)?;
            // Belt and braces: the peer we actually reached must be acceptable too.
            if let Some(remote) = response.remote_addr()
                && !self.is_allowed(remote)
                && let Some(reason) = address_is_refused(remote.ip())
            {
                return Err(FetchError::Refused(format!("{} ({reason})", remote.ip())));
            }
            let location = response
                .status()
                .is_redirection()
                .then(|| response.headers().get(LOCATION))
                .flatten();
            let Some(location) = location else {
                return read_body(response, current, max_bytes).await;
            };
            if hop == MAX_REDIRECTS {
                break;
            }
            let location = location.to_str().map_err(|_| {
                FetchError::InvalidUrl("redirect Location is not valid text".to_owned())
            })?;
            current = current.join(location).map_err(|error| {
                FetchError::InvalidUrl(format!("redirect to {location}: {error}"))
            })?;
            tracing::debug!(hop = hop + 1, "web_fetch: following redirect");
        }
        Err(FetchError::Failed(format!(
            "too many redirects (more than {MAX_REDIRECTS})"
        )))
    }
}

impl HttpWebFetcher {
    /// POSTs `body` as JSON to `url` under the same address policy as a fetch (a cron job's
    /// webhook delivery, spec `openclaw-automation.md` §2.8): no redirects followed, no
    /// internal address reached, at most `timeout`, with `Authorization: Bearer <token>`
    /// when a token is given. Returns the HTTP status.
    pub async fn post_json(
        &self, url: &str, body: &serde_json::Value, bearer: Option<&str>, timeout: Duration,
    ) -> Result<u16, FetchError> {
        let url = Url::parse(url.trim())
            .map_err(|error| FetchError::InvalidUrl(format!("{url}: {error}")))?;
        self.check(&url)?;
        let mut request = self.client.post(url).timeout(timeout).json(body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(map_error)?;
        if let Some(remote) = response.remote_addr()
            && !self.is_allowed(remote)
            && let Some(reason) = address_is_refused(remote.ip())
        {
            return Err(FetchError::Refused(format!("{} ({reason})", remote.ip())));
        }
        Ok(response.status().as_u16())
    }
}

#[async_trait]
impl WebFetcher for HttpWebFetcher {
    #[tracing::instrument(skip_all, fields(max_bytes = max_bytes, timeout_ms = timeout.as_millis()))]
    async fn fetch(
        &self, url: &str, max_bytes: usize, timeout: Duration,
    ) -> Result<FetchedPage, FetchError> {
        let outcome = tokio::time::timeout(timeout, self.fetch_hops(url, max_bytes))
            .await
            .unwrap_or(Err(FetchError::Timeout(timeout)));
        match &outcome {
            Ok(page) => tracing::debug!(
                status = page.status,
                bytes = page.body.len(),
                truncated = page.truncated,
                "web_fetch: fetched"
            ),
            Err(error) => tracing::info!(error = %error, "web_fetch: failed"),
        }
        outcome
    }
}

/// Streams the body, keeping at most `max_bytes`.
async fn read_body(
    mut response: reqwest::Response, url: Url, max_bytes: usize,
) -> Result<FetchedPage, FetchError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(map_error)? {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(FetchedPage {
        url: url.into(),
        status,
        content_type,
        body,
        truncated,
    })
}

/// Maps a reqwest error, recognising a refusal by [`GuardedResolver`] anywhere in its chain.
fn map_error(error: reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<RefusedAddress>() {
            return FetchError::Refused(refused.to_string());
        }
        source = current.source();
    }
    if error.is_connect() {
        return FetchError::Failed(format!("could not connect: {}", error.without_url()));
    }
    FetchError::Failed(error.without_url().to_string())
}

/// A DNS answer (or name) the policy refuses.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to a refused address ({reason})")]
struct RefusedAddress {
    host: String,
    reason: &'static str,
}

/// Resolves with the system resolver (via tokio) and fails the lookup when the name or any
/// of its addresses is refused, so a name pointing at `127.0.0.1` or `169.254.169.254`
/// (DNS rebinding included) never gets a connection.
#[derive(Debug, Clone, Copy)]
struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            if let Some(reason) = hostname_is_refused(&host) {
                return Err(Box::new(RefusedAddress { host, reason }) as _);
            }
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let addrs: Addrs = Box::new(vet_addresses(host, addrs)?.into_iter());
            Ok(addrs)
        })
    }
}

/// Accepts a DNS answer only if every address in it is acceptable: a connection may go to
/// any of them, so one internal address poisons the whole answer.
fn vet_addresses(host: String, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, RefusedAddress> {
    if let Some(reason) = addrs.iter().find_map(|addr| address_is_refused(addr.ip())) {
        return Err(RefusedAddress { host, reason });
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn addr(text: &str) -> SocketAddr {
        SocketAddr::new(text.parse().unwrap(), 0)
    }

    #[test]
    fn a_dns_answer_with_any_internal_address_is_refused() {
        // A rebinding name answering with loopback, or mixing a public and a private address.
        for answer in [
            vec![addr("127.0.0.1")],
            vec![addr("93.184.216.34"), addr("10.0.0.7")],
            vec![addr("::ffff:169.254.169.254")],
            vec![addr("fd00:ec2::254")],
        ] {
            let result = vet_addresses("rebind.example.com".to_owned(), answer.clone());
            assert!(result.is_err(), "{answer:?} accepted");
        }
        let public = vec![addr("93.184.216.34"), addr("2606:2800:220:1::1")];
        assert_eq!(
            vet_addresses("example.com".to_owned(), public.clone()).unwrap(),
            public
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_internal_names_before_looking_them_up() {
        for name in ["localhost", "metadata.google.internal", "vm"] {
            let result = GuardedResolver.resolve(Name::from_str(name).unwrap()).await;
            let error = result.err().expect("internal name resolved");
            assert!(
                error.downcast_ref::<RefusedAddress>().is_some(),
                "{name}: {error}"
            );
        }
    }
}
