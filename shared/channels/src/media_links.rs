//! Reply files handed out by link instead of inline: [`MediaPublisher`] stores a reply's file
//! once in the blob store, content-addressed (`media/outbound/<sha256>.<ext>`, so a resent reply
//! stores nothing twice), and asks the deployment's [`MediaLinks`] for a time-limited URL to
//! it. [`SignedMediaLinks`] is the link maker of `clawless local`: URLs of the local server's
//! `GET /media/<key>` route, signed with HMAC-SHA256 under a key derived from a secret the
//! machine already has, which that route checks with [`SignedMediaLinks::check`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_base::clock::Clock;
use clawless_base::media::OutboundMedia;
use clawless_base::media_links::{LinkError, MEDIA_LINK_TTL, MediaLinks, is_linkable};
use clawless_base::object_store::{ObjectStore, PutCondition, StoreError};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Where reply files are stored, each under the hash of its bytes.
pub const OUTBOUND_PREFIX: &str = "media/outbound/";

/// The path of the local server's media route; a link is `<base>/media/<rest of the key>`.
pub const MEDIA_ROUTE_PREFIX: &str = "/media/";

/// What the link key is derived for, so the secret it comes from signs nothing else this way.
const LINK_KEY_CONTEXT: &[u8] = b"clawless media links v1";

/// A reply file, stored and linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedMedia {
    /// Its key in the blob store.
    pub key: String,
    /// Where the receiver fetches it.
    pub url: String,
}

/// Why a reply file could not be handed out (the store or the link maker failed; worth a
/// retry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reply file {name:?} could not be linked: {reason}")]
pub struct PublishError {
    /// The file's name.
    pub name: String,
    /// What failed.
    pub reason: String,
}

/// Stores reply files in the blob store and links them.
#[derive(Clone)]
pub struct MediaPublisher {
    store: Arc<dyn ObjectStore>,
    links: Arc<dyn MediaLinks>,
}

impl std::fmt::Debug for MediaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaPublisher")
            .field("links", &self.links)
            .finish_non_exhaustive()
    }
}

impl MediaPublisher {
    /// Files go into `store` and out through `links`.
    pub fn new(store: Arc<dyn ObjectStore>, links: Arc<dyn MediaLinks>) -> Self {
        Self { store, links }
    }

    /// Stores `media` (unless the same bytes under the same extension are there already) and
    /// returns its key and link.
    pub async fn publish(&self, media: &OutboundMedia) -> Result<PublishedMedia, PublishError> {
        let failed = |reason: String| PublishError {
            name: media.name.clone(),
            reason,
        };
        let key = outbound_key(media);
        let present = self
            .store
            .head(&key)
            .await
            .map_err(|err| failed(format!("blob store: {err}")))?;
        if present.is_none() {
            match self
                .store
                .put(&key, media.bytes.clone(), PutCondition::IfAbsent)
                .await
            {
                // A concurrent send stored the same bytes first.
                Ok(_) | Err(StoreError::Conflict(_)) => {}
                Err(err) => return Err(failed(format!("blob store: {err}"))),
            }
        }
        let url = self
            .links
            .link(&key, &media.mime)
            .await
            .map_err(|err| failed(err.reason))?;
        Ok(PublishedMedia { key, url })
    }
}

/// `media/outbound/<sha256 of the bytes>.<ext>`: the same for the same file, whoever sends it.
pub fn outbound_key(media: &OutboundMedia) -> String {
    let digest = hex::encode(Sha256::digest(&media.bytes));
    let ext = crate::media::extension_of(Some(&media.name), Some(&media.mime), media.kind);
    format!("{OUTBOUND_PREFIX}{digest}.{ext}")
}

/// The query of a signed local link: `type` (the Content-Type to serve), `expires` (ms since
/// the epoch) and `sig` (hex HMAC-SHA256). Every field is optional here so that a link
/// missing one is refused by [`SignedMediaLinks::check`] with a reason, not by a parser.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct LinkQuery {
    /// The Content-Type the link serves.
    #[serde(rename = "type")]
    pub mime: Option<String>,
    /// When the link stops working, in ms since the Unix epoch.
    pub expires: Option<String>,
    /// The signature.
    pub sig: Option<String>,
}

/// Why a local link was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefusal {
    /// No signature, or one that is not 64 hex digits (HTTP 401).
    #[error("this link is not signed")]
    Unsigned,
    /// The signature does not cover this key, type and expiry (HTTP 403).
    #[error("this link's signature does not match")]
    BadSignature,
    /// The link is past its expiry (HTTP 403).
    #[error("this link has expired")]
    Expired,
}

/// `clawless local`'s links: `<base>/media/<key below media/>?type=…&expires=…&sig=…`, valid
/// for [`MEDIA_LINK_TTL`] unless set otherwise.
#[derive(Clone)]
pub struct SignedMediaLinks {
    base_url: String,
    key: Arc<[u8]>,
    ttl: Duration,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SignedMediaLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("SignedMediaLinks")
            .field("base_url", &self.base_url)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SignedMediaLinks {
    /// Links to the server at `base_url` (e.g. `http://127.0.0.1:8787`), signed under a key
    /// derived from `secret`.
    pub fn new(base_url: &str, secret: &[u8], clock: Arc<dyn Clock>) -> Self {
        let key = mac(secret, LINK_KEY_CONTEXT).finalize().into_bytes();
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            key: Arc::from(key.as_slice()),
            ttl: MEDIA_LINK_TTL,
            clock,
        }
    }

    /// The same links, valid for `ttl`.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The link to `key` served as `mime`, expiring at `expires_ms`.
    pub fn url_for(&self, key: &str, mime: &str, expires_ms: u64) -> Result<String, LinkError> {
        let refuse = |reason: &str| LinkError {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        if !is_linkable(key) || key.chars().any(char::is_control) {
            return Err(refuse("only keys under media/ are linked"));
        }
        if mime.is_empty() || mime.chars().any(char::is_control) {
            return Err(refuse("the MIME type is empty or holds control characters"));
        }
        let mut url = url::Url::parse(&self.base_url)
            .map_err(|err| refuse(&format!("bad base URL: {err}")))?;
        url.path_segments_mut()
            .map_err(|()| refuse("the base URL cannot take a path"))?
            .pop_if_empty()
            .extend(key.split('/'));
        let expires = expires_ms.to_string();
        let sig = hex::encode(
            mac(&self.key, signed_text(key, mime, &expires).as_bytes())
                .finalize()
                .into_bytes(),
        );
        url.query_pairs_mut()
            .append_pair("type", mime)
            .append_pair("expires", &expires)
            .append_pair("sig", &sig);
        Ok(url.into())
    }

    /// Checks a request for `key` with `query` at `now_ms`: the signature first (in constant
    /// time), then the expiry. On success, the Content-Type to serve.
    pub fn check(&self, key: &str, query: &LinkQuery, now_ms: u64) -> Result<String, LinkRefusal> {
        let sig = query
            .sig
            .as_deref()
            .filter(|sig| sig.len() == 64)
            .and_then(|sig| hex::decode(sig).ok())
            .ok_or(LinkRefusal::Unsigned)?;
        let (Some(mime), Some(expires)) = (query.mime.as_deref(), query.expires.as_deref()) else {
            return Err(LinkRefusal::BadSignature);
        };
        mac(&self.key, signed_text(key, mime, expires).as_bytes())
            .verify_slice(&sig)
            .map_err(|_| LinkRefusal::BadSignature)?;
        let expires: u64 = expires.parse().map_err(|_| LinkRefusal::BadSignature)?;
        if now_ms >= expires {
            return Err(LinkRefusal::Expired);
        }
        Ok(mime.to_owned())
    }
}

#[async_trait]
impl MediaLinks for SignedMediaLinks {
    async fn link(&self, key: &str, mime: &str) -> Result<String, LinkError> {
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        self.url_for(key, mime, self.clock.now_ms().saturating_add(ttl_ms))
    }
}

/// What a local link signs: the method, the key, the type and the expiry, one a line (none of
/// them holds a line break, so no two differ and sign alike).
fn signed_text(key: &str, mime: &str, expires: &str) -> String {
    format!("GET\n{key}\n{mime}\n{expires}")
}

fn mac(key: &[u8], text: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(text);
    mac
}

#[cfg(test)]
mod tests {
    use clawless_base::media::MediaKind;
    use clawless_core::testing::InMemoryObjectStore;

    use super::*;

    #[derive(Debug)]
    struct FixedClock(u64);

    impl Clock for FixedClock {
        fn now_ms(&self) -> u64 {
            self.0
        }
    }

    fn links(now_ms: u64) -> SignedMediaLinks {
        SignedMediaLinks::new(
            "http://127.0.0.1:8787/",
            b"machine secret",
            Arc::new(FixedClock(now_ms)),
        )
    }

    fn query_of(url: &str) -> (String, LinkQuery) {
        let url = url::Url::parse(url).unwrap();
        let mut query = LinkQuery::default();
        for (name, value) in url.query_pairs() {
            match &*name {
                "type" => query.mime = Some(value.into_owned()),
                "expires" => query.expires = Some(value.into_owned()),
                "sig" => query.sig = Some(value.into_owned()),
                _ => {}
            }
        }
        (url.path().trim_start_matches('/').to_owned(), query)
    }

    fn png(bytes: &[u8]) -> OutboundMedia {
        OutboundMedia {
            kind: MediaKind::Image,
            name: "chart.png".to_owned(),
            mime: "image/png".to_owned(),
            bytes: bytes.to_vec(),
            as_voice: false,
        }
    }

    #[tokio::test]
    async fn a_link_checks_until_it_expires_and_not_for_another_key_or_type() {
        let maker = links(1_000);
        let url = maker
            .link("media/outbound/ab.png", "image/png")
            .await
            .unwrap();
        assert!(
            url.starts_with(
                "http://127.0.0.1:8787/media/outbound/ab.png?type=image%2Fpng&expires=86401000&sig="
            ),
            "{url}"
        );
        let (key, query) = query_of(&url);
        assert_eq!(key, "media/outbound/ab.png");
        assert_eq!(maker.check(&key, &query, 2_000), Ok("image/png".to_owned()));
        assert_eq!(
            maker.check(&key, &query, 86_401_000),
            Err(LinkRefusal::Expired)
        );
        assert_eq!(
            maker.check("media/outbound/other.png", &query, 2_000),
            Err(LinkRefusal::BadSignature)
        );
        let as_html = LinkQuery {
            mime: Some("text/html".to_owned()),
            ..query.clone()
        };
        assert_eq!(
            maker.check(&key, &as_html, 2_000),
            Err(LinkRefusal::BadSignature)
        );
        let longer = LinkQuery {
            expires: Some("99986401000".to_owned()),
            ..query.clone()
        };
        assert_eq!(
            maker.check(&key, &longer, 2_000),
            Err(LinkRefusal::BadSignature)
        );
        let unsigned = LinkQuery {
            sig: None,
            ..query.clone()
        };
        assert_eq!(
            maker.check(&key, &unsigned, 2_000),
            Err(LinkRefusal::Unsigned)
        );
        // Another machine's secret signs other links.
        let other = SignedMediaLinks::new(
            "http://127.0.0.1:8787",
            b"other secret",
            Arc::new(FixedClock(1_000)),
        );
        assert_eq!(
            other.check(&key, &query, 2_000),
            Err(LinkRefusal::BadSignature)
        );
    }

    #[tokio::test]
    async fn keys_outside_media_are_never_linked() {
        let maker = links(0);
        for key in ["sessions/s1.json", "media/../sessions/s1.json", "media/"] {
            assert!(maker.link(key, "image/png").await.is_err(), "{key}");
        }
        assert!(
            maker
                .link("media/a.png", "text/html\nx-evil: 1")
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_file_is_stored_once_under_its_hash_and_linked() {
        let store = Arc::new(InMemoryObjectStore::new());
        let publisher = MediaPublisher::new(
            Arc::clone(&store) as Arc<dyn ObjectStore>,
            Arc::new(links(0)),
        );
        let first = publisher.publish(&png(b"\x89PNG one")).await.unwrap();
        let again = publisher.publish(&png(b"\x89PNG one")).await.unwrap();
        assert_eq!(first, again);
        let expected = format!(
            "media/outbound/{}.png",
            hex::encode(Sha256::digest(b"\x89PNG one"))
        );
        assert_eq!(first.key, expected);
        let other = publisher.publish(&png(b"\x89PNG two")).await.unwrap();
        assert_ne!(other.key, first.key);
        let listing = store.list(OUTBOUND_PREFIX, 10).await.unwrap();
        assert_eq!(listing.objects.len(), 2);
        let stored = store.get(&first.key, 64).await.unwrap().unwrap();
        assert_eq!(stored.bytes, b"\x89PNG one");
    }
}
