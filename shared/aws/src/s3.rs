//! [`S3ObjectStore`]: the object store port on one S3 bucket.
//!
//! Owns the translation between the port and S3's API: paginated listings, unquoted ETags,
//! size checks before downloading, conditional writes (`If-None-Match: *` / `If-Match`) and
//! the mapping of S3's error responses to [`StoreError`]. SDK errors are kept as the source.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use clawless_base::object_store::{
    Listing, Object, ObjectMeta, ObjectStore, PutCondition, RefusalReason, RefusedEntry,
    StoreError, key_below_root, validate_key,
};

/// S3's own ceiling on keys per ListObjectsV2 page.
const MAX_PAGE_SIZE: usize = 1000;

/// An [`ObjectStore`] on an S3 bucket; keys are object keys, unchanged.
///
/// - Listings page through ListObjectsV2 and stop requesting pages once `max_keys` objects are
///   collected. Directory markers (keys ending in `/`) are skipped; keys another writer stored
///   that the port could never read back (`a//b`, `../x`, …) are refused as
///   [`RefusalReason::Unreadable`].
/// - ETags are S3's, without the surrounding quotes (for a single-part upload, the MD5).
/// - Conditional writes use S3's native `If-None-Match: *` and `If-Match`, so they are atomic;
///   `412 Precondition Failed`, `409 ConditionalRequestConflict` and (for `If-Match` on a
///   missing key) `404 NoSuchKey` become [`StoreError::Conflict`].
#[derive(Debug, Clone)]
pub struct S3ObjectStore {
    client: Client,
    bucket: String,
    page_size: usize,
}

impl S3ObjectStore {
    /// A store on `bucket`, using `client` (built once per cold start).
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
            page_size: MAX_PAGE_SIZE,
        }
    }

    /// Asks S3 for at most `page_size` keys per ListObjectsV2 request (clamped to 1..=1000).
    /// Only useful to exercise pagination cheaply in tests; the default is S3's maximum.
    pub fn with_list_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.clamp(1, MAX_PAGE_SIZE);
        self
    }

    /// The bucket this store reads and writes.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn unavailable<E>(&self, action: &str, key: &str, err: E) -> StoreError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        StoreError::unavailable(
            format!("S3 {action} s3://{}/{key} failed", self.bucket),
            err,
        )
    }
}

/// Strips the quotes S3 puts around ETags.
fn unquote(etag: Option<&str>) -> String {
    etag.unwrap_or_default().trim_matches('"').to_owned()
}

/// Sizes are never negative; a missing or negative one reads as 0.
fn size_of(size: Option<i64>) -> u64 {
    size.and_then(|size| u64::try_from(size).ok()).unwrap_or(0)
}

/// The HTTP status S3 answered with, when it answered at all.
fn status_of<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    err.raw_response()
        .map(|response| response.status().as_u16())
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket, prefix, max_keys))]
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        if !prefix.is_empty() {
            validate_key(prefix.strip_suffix('/').unwrap_or(prefix))?;
        }
        let mut listing = Listing::default();
        let mut continuation: Option<String> = None;
        loop {
            // Ask for no more than still fits, so S3 stops where the caller does. With nothing
            // left to fill (max_keys = 0), one key tells whether the listing is truncated.
            let wanted = max_keys
                .saturating_sub(listing.objects.len())
                .clamp(1, self.page_size);
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .max_keys(i32::try_from(wanted).unwrap_or(1))
                .set_continuation_token(continuation.take())
                .send()
                .await
                .map_err(|err| self.unavailable("ListObjectsV2", prefix, err))?;
            for object in page.contents() {
                let key = object.key().unwrap_or_default();
                if key.ends_with('/') {
                    continue;
                }
                if validate_key(key).is_err() {
                    listing.refused.push(RefusedEntry {
                        key: key.to_owned(),
                        reason: RefusalReason::Unreadable,
                    });
                    continue;
                }
                if listing.objects.len() == max_keys {
                    listing.truncated = true;
                    return Ok(listing);
                }
                listing.objects.push(ObjectMeta {
                    key: key.to_owned(),
                    etag: unquote(object.e_tag()),
                    size: size_of(object.size()),
                });
            }
            let more = page.is_truncated().unwrap_or(false);
            if !more {
                return Ok(listing);
            }
            if listing.objects.len() == max_keys {
                listing.truncated = true;
                return Ok(listing);
            }
            continuation = page.next_continuation_token().map(str::to_owned);
            if continuation.is_none() {
                return Err(StoreError::Unavailable {
                    message: format!(
                        "S3 ListObjectsV2 s3://{}/{prefix} is truncated but has no continuation token",
                        self.bucket
                    ),
                    source: None,
                });
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket, key, max_bytes))]
    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        validate_key(key)?;
        let response = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) if matches!(err.as_service_error(), Some(GetObjectError::NoSuchKey(_))) => {
                return Ok(None);
            }
            Err(err) if status_of(&err) == Some(404) => return Ok(None),
            Err(err) => return Err(self.unavailable("GetObject", key, err)),
        };
        let announced = size_of(response.content_length());
        if announced > max_bytes {
            // Dropping the response abandons the body without downloading it.
            return Err(StoreError::TooLarge {
                key: key.to_owned(),
                size: announced,
                limit: max_bytes,
            });
        }
        let etag = unquote(response.e_tag());
        let mut body = response.body;
        let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|err| self.unavailable("GetObject body of", key, err))?
        {
            bytes.extend_from_slice(&chunk);
            // Never trust the announced length further than the caller's limit.
            if bytes.len() as u64 > max_bytes {
                return Err(StoreError::TooLarge {
                    key: key.to_owned(),
                    size: bytes.len() as u64,
                    limit: max_bytes,
                });
            }
        }
        let meta = ObjectMeta {
            key: key.to_owned(),
            etag,
            size: bytes.len() as u64,
        };
        Ok(Some(Object { meta, bytes }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket, key))]
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        validate_key(key)?;
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(response) => Ok(Some(ObjectMeta {
                key: key.to_owned(),
                etag: unquote(response.e_tag()),
                size: size_of(response.content_length()),
            })),
            Err(err) if matches!(err.as_service_error(), Some(HeadObjectError::NotFound(_))) => {
                Ok(None)
            }
            Err(err) if status_of(&err) == Some(404) => Ok(None),
            Err(err) => Err(self.unavailable("HeadObject", key, err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket, key, size = bytes.len()))]
    async fn put(
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        validate_key(key)?;
        let size = bytes.len() as u64;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes));
        let request = match &condition {
            PutCondition::Always => request,
            PutCondition::IfAbsent => request.if_none_match("*"),
            PutCondition::IfMatch(etag) => request.if_match(format!("\"{etag}\"")),
        };
        match request.send().await {
            Ok(response) => Ok(ObjectMeta {
                key: key.to_owned(),
                etag: unquote(response.e_tag()),
                size,
            }),
            Err(err) => {
                let status = status_of(&err);
                let precondition_failed = status == Some(412)
                    || (status == Some(409) && err.code() == Some("ConditionalRequestConflict"))
                    // If-Match on a key that does not exist: S3 answers 404 NoSuchKey.
                    || (matches!(condition, PutCondition::IfMatch(_)) && status == Some(404));
                if precondition_failed {
                    tracing::debug!(status, code = err.code(), "conditional put refused");
                    Err(StoreError::Conflict(key.to_owned()))
                } else {
                    Err(self.unavailable("PutObject", key, err))
                }
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(bucket = %self.bucket, key))]
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        validate_key(key)?;
        // S3 answers 204 whether or not the key existed.
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|err| self.unavailable("DeleteObject", key, err))?;
        Ok(())
    }

    fn location(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    fn key_for_location(&self, location: &str) -> Option<String> {
        key_below_root(location, &self.identity())
    }

    fn identity(&self) -> String {
        format!("s3://{}", self.bucket)
    }
}
