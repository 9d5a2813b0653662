//! [`SqsJobs`]: the node's own SQS queue, read directly (AWS mode), so nothing runs in the
//! backend while a node waits for work.
//!
//! The backend vends short-lived credentials scoped to this one queue through
//! `POST /nodes/credentials` ([`BackendClient::queue_credentials`]). They are cached with the
//! SQS client built from them and renewed when less than [`RENEW_BEFORE_EXPIRY`] is left, or
//! after SQS refused them (the cache is dropped, so the next call asks the backend again). A
//! revoked node gets 401 there, which surfaces as [`ClientError::Unauthorized`], and the
//! worker stops.
//!
//! A received job is hidden from further receives for a short lease ([`JOB_LEASE`]), which
//! the worker extends ([`SqsJobs::extend`]) for as long as it handles the job. A job whose
//! node died (or which a long poll took for a connection that was already gone: SQS may hand
//! a message to a receive whose caller has left) is visible again within one lease; the
//! node's journal then answers it (interrupted, or the stored report) or runs it if it never
//! started.
//!
//! No AWS configuration is read from the machine (no profile, no environment, no instance
//! metadata): region, endpoint and credentials all come from the backend's answer.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use tokio::sync::Mutex;

use crate::client::{BackendClient, ClientError, JobDelivery};
use clawless_base::clock::{Clock, SystemClock};

/// Credentials are renewed when they have less than this left, so a long poll (20 s) or an
/// acknowledgement after a long job never starts with credentials about to lapse.
pub const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// How long a received job stays hidden from further receives unless the worker extends it.
/// The worker extends it every third of this while it handles the job, so a running job is
/// never handed out again however long it runs, and a job whose node is gone comes back
/// within this.
pub const JOB_LEASE: Duration = Duration::from_secs(30);

/// SQS's longest long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// Jobs per receive: one, because the worker runs them one at a time and only the job it is
/// running has its lease extended.
const MESSAGES_PER_RECEIVE: i32 = 1;

/// The name the SDK shows for where the credentials came from.
const PROVIDER_NAME: &str = "clawless-nodes";

/// SQS error codes that mean the credentials are expired, wrong or not allowed.
const AUTH_ERROR_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "ExpiredToken",
    "ExpiredTokenException",
    "IncompleteSignature",
    "InvalidClientTokenId",
    "InvalidSecurity",
    "InvalidSecurityToken",
    "MissingAuthenticationToken",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
];

/// A client for the vended credentials and the queue they open.
#[derive(Debug, Clone)]
struct Session {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    expires_at_ms: u64,
}

/// Receives and acknowledges this node's jobs on its SQS queue.
pub struct SqsJobs {
    backend: BackendClient,
    clock: Arc<dyn Clock>,
    session: Mutex<Option<Session>>,
    lease: Duration,
}

impl std::fmt::Debug for SqsJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsJobs").finish_non_exhaustive()
    }
}

impl SqsJobs {
    /// Jobs of the node `backend` speaks for (a [`BackendClient::for_node`] client).
    pub fn new(backend: BackendClient) -> Self {
        Self {
            backend,
            clock: Arc::new(SystemClock),
            session: Mutex::new(None),
            lease: JOB_LEASE,
        }
    }

    /// Hides received jobs for `lease` (whole seconds, at least one) instead of [`JOB_LEASE`].
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// How long a received (or extended) job stays hidden.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Judges credential expiry by `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Long-polls up to `wait` (at most [`MAX_WAIT`], whole seconds) for a job, hiding it
    /// for the lease.
    pub async fn receive(&self, wait: Duration) -> Result<Vec<JobDelivery>, ClientError> {
        let session = self.session().await?;
        let wait_seconds = i32::try_from(wait.min(MAX_WAIT).as_secs()).unwrap_or(20);
        let output = session
            .client
            .receive_message()
            .queue_url(&session.queue_url)
            .max_number_of_messages(MESSAGES_PER_RECEIVE)
            .wait_time_seconds(wait_seconds)
            .visibility_timeout(self.lease_seconds())
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await;
        let output = match output {
            Ok(output) => output,
            Err(err) => return Err(self.failed("ReceiveMessage", err).await),
        };
        let mut deliveries = Vec::new();
        for message in output.messages() {
            // A message without a receipt handle cannot be acknowledged; SQS always sends
            // one, and a message skipped here comes back after its visibility timeout.
            let Some(receipt) = message.receipt_handle() else {
                tracing::warn!("SQS returned a message without a receipt handle; skipped");
                continue;
            };
            let receive_count = message
                .attributes()
                .and_then(|map| map.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|count| count.parse().ok())
                .unwrap_or(1);
            deliveries.push(JobDelivery {
                body: message.body().unwrap_or_default().to_owned(),
                receipt: receipt.to_owned(),
                receive_count,
            });
        }
        Ok(deliveries)
    }

    /// Deletes a received job from the queue.
    pub async fn ack(&self, receipt: &str) -> Result<(), ClientError> {
        let session = self.session().await?;
        let deleted = session
            .client
            .delete_message()
            .queue_url(&session.queue_url)
            .receipt_handle(receipt)
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(err) => Err(self.failed("DeleteMessage", err).await),
        }
    }

    /// Hides a received job for another lease, counted from now.
    pub async fn extend(&self, receipt: &str) -> Result<(), ClientError> {
        let session = self.session().await?;
        let extended = session
            .client
            .change_message_visibility()
            .queue_url(&session.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(self.lease_seconds())
            .send()
            .await;
        match extended {
            Ok(_) => Ok(()),
            Err(err) => Err(self.failed("ChangeMessageVisibility", err).await),
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease.as_secs()).unwrap_or(i32::MAX)
    }

    /// The cached session, renewed through the backend when missing or about to expire.
    async fn session(&self) -> Result<Session, ClientError> {
        let mut cached = self.session.lock().await;
        let renew_at = |session: &Session| {
            session
                .expires_at_ms
                .saturating_sub(millis(RENEW_BEFORE_EXPIRY))
        };
        if let Some(session) = cached.as_ref()
            && self.clock.now_ms() < renew_at(session)
        {
            return Ok(session.clone());
        }
        let access = self.backend.queue_credentials().await?;
        let credentials = Credentials::new(
            access.credentials.access_key_id,
            access.credentials.secret_access_key,
            Some(access.credentials.session_token),
            Some(UNIX_EPOCH + Duration::from_millis(access.credentials.expires_at_ms)),
            PROVIDER_NAME,
        );
        let mut config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(access.region))
            .credentials_provider(credentials);
        if let Some(endpoint) = access.endpoint_url.filter(|url| !url.is_empty()) {
            config = config.endpoint_url(endpoint);
        }
        let session = Session {
            client: aws_sdk_sqs::Client::from_conf(config.build()),
            queue_url: access.queue_url,
            expires_at_ms: access.credentials.expires_at_ms,
        };
        *cached = Some(session.clone());
        Ok(session)
    }

    /// Maps an SDK error; when it looks like the credentials were refused, drops the cached
    /// session so the next call asks the backend for new ones.
    async fn failed<E>(
        &self, operation: &'static str, err: SdkError<E, HttpResponse>,
    ) -> ClientError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if looks_like_auth(&err) {
            tracing::info!(
                operation,
                "SQS refused the node's credentials; asking the backend for new ones"
            );
            *self.session.lock().await = None;
        }
        let message = aws_sdk_sqs::error::DisplayErrorContext(&err).to_string();
        ClientError::Queue {
            operation,
            message,
            source: Box::new(err),
        }
    }
}

/// Refused credentials: a 401/403, an auth error code, or a request that could not even be
/// built (signing failed, e.g. credentials already expired).
fn looks_like_auth<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    if matches!(err, SdkError::ConstructionFailure(_)) {
        return true;
    }
    let status = err
        .raw_response()
        .map(|response| response.status().as_u16());
    matches!(status, Some(401 | 403))
        || err
            .code()
            .is_some_and(|code| AUTH_ERROR_CODES.contains(&code))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
