//! [`S3MediaLinks`]: the media links port as presigned S3 GET URLs.
//!
//! A link is signed (SigV4, query string) with the function's own credentials and names the
//! Content-Type S3 answers with (`response-content-type`), so the receiver needs no AWS
//! account. It stays valid for the requested time, but never longer than the credentials
//! that signed it: on Lambda those are the execution role's session credentials, which
//! last a few hours, so a link may stop working before its day is up.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use clawless_base::media_links::{LinkError, MEDIA_LINK_TTL, MediaLinks, is_linkable};

/// SigV4's own ceiling on a presigned URL's validity: seven days.
const MAX_PRESIGNED_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Presigned GET URLs for `media/` keys of one bucket.
#[derive(Debug, Clone)]
pub struct S3MediaLinks {
    client: Client,
    bucket: String,
    ttl: Duration,
}

impl S3MediaLinks {
    /// Links into `bucket`, signed by `client`'s credentials, valid for [`MEDIA_LINK_TTL`].
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
            ttl: MEDIA_LINK_TTL,
        }
    }

    /// The same links, valid for `ttl` (at most seven days, SigV4's limit).
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.min(MAX_PRESIGNED_TTL);
        self
    }
}

#[async_trait]
impl MediaLinks for S3MediaLinks {
    async fn link(&self, key: &str, mime: &str) -> Result<String, LinkError> {
        let refuse = |reason: String| LinkError {
            key: key.to_owned(),
            reason,
        };
        if !is_linkable(key) {
            return Err(refuse("only keys under media/ are linked".to_owned()));
        }
        let config = PresigningConfig::expires_in(self.ttl)
            .map_err(|err| refuse(format!("presigning: {err}")))?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .response_content_type(mime)
            .presigned(config)
            .await
            .map_err(|err| refuse(format!("presigning s3://{}/{key}: {err}", self.bucket)))?;
        Ok(request.uri().to_owned())
    }
}
