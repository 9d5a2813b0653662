//! [`StsQueueCredentials`]: the credential vending port on STS `AssumeRole`.
//!
//! Owns the session policy that narrows the assumed role to one node queue, and the mapping
//! from a queue URL to its ARN. The role itself (configured per deployment) should allow the
//! same four actions on `<prefix>node-*`; the session policy cuts that down to one queue, so a
//! node can never read another node's jobs, nor send, purge or delete anything.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sts::Client;
use clawless_core::nodes::credential_lifetime;
use clawless_core::nodes::{CredentialError, QueueCredentialVendor, QueueCredentials};

/// Everything a node does with its queue: long-poll, acknowledge, extend a job it is still
/// running, and read the queue's attributes.
pub const NODE_QUEUE_ACTIONS: [&str; 4] = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
];

/// Longest role session name STS accepts.
const MAX_SESSION_NAME_LEN: usize = 64;

/// The IAM session policy allowing [`NODE_QUEUE_ACTIONS`] on `queue_arn` and nothing else.
pub fn queue_session_policy(queue_arn: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": NODE_QUEUE_ACTIONS,
            "Resource": queue_arn,
        }],
    })
    .to_string()
}

/// The ARN of the SQS queue at `queue_url`
/// (`https://sqs.<region>.amazonaws.com/<account>/<name>`, or an emulator's
/// `http://host:port/<account>/<name>`). The region comes from the host when it names one,
/// else `default_region`. `None` for anything that is not a queue URL: a 12-digit account
/// and a queue name of letters, digits, `-` and `_` (plus `.fifo`).
pub fn queue_arn_from_url(queue_url: &str, default_region: Option<&str>) -> Option<String> {
    let (_, rest) = queue_url.split_once("://")?;
    let (host, path) = rest.split_once('/')?;
    let segments: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    let [account, name] = segments.as_slice() else {
        return None;
    };
    let valid_account = account.len() == 12 && account.bytes().all(|byte| byte.is_ascii_digit());
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    let valid_name = !stem.is_empty()
        && name.len() <= 80
        && stem
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if !valid_account || !valid_name {
        return None;
    }
    let host = host.split(':').next().unwrap_or(host);
    let from_host = host
        .strip_prefix("sqs.")
        .and_then(|rest| rest.split_once('.'))
        .map(|(region, _)| region)
        .filter(|region| !region.is_empty());
    let region = from_host.or(default_region)?;
    Some(format!("arn:aws:sqs:{region}:{account}:{name}"))
}

/// `clawless-node-<id>`, cut to STS's 64 characters and its alphabet.
fn session_name(node_id: &str) -> String {
    let mut name: String = format!("clawless-node-{node_id}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@-_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.truncate(MAX_SESSION_NAME_LEN);
    name
}

/// The credential vending port on STS: `AssumeRole` on one configured role, with
/// [`queue_session_policy`] for the node's queue and a lifetime of
/// [`credential_lifetime`]`(requested)` (15 minutes to an hour). The session is named
/// `clawless-node-<id>` so CloudTrail shows which node acted.
#[derive(Debug, Clone)]
pub struct StsQueueCredentials {
    client: Client,
    role_arn: String,
}

impl StsQueueCredentials {
    /// Vends credentials of the role `role_arn`, using `client` (whose region is used for
    /// queue URLs that do not name one).
    pub fn new(client: Client, role_arn: impl Into<String>) -> Self {
        Self {
            client,
            role_arn: role_arn.into(),
        }
    }
}

#[async_trait]
impl QueueCredentialVendor for StsQueueCredentials {
    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn vend(
        &self, node_id: &str, queue: &str, lifetime: Duration,
    ) -> Result<QueueCredentials, CredentialError> {
        let region = self.client.config().region().map(|region| region.as_ref());
        let queue_arn = queue_arn_from_url(queue, region).ok_or_else(|| {
            CredentialError::bare(format!(
                "{queue:?} is not an SQS queue URL credentials can be scoped to"
            ))
        })?;
        let seconds = i32::try_from(credential_lifetime(lifetime).as_secs()).unwrap_or(900);
        let output = self
            .client
            .assume_role()
            .role_arn(&self.role_arn)
            .role_session_name(session_name(node_id))
            .policy(queue_session_policy(&queue_arn))
            .duration_seconds(seconds)
            .send()
            .await
            .map_err(|err| {
                CredentialError::new(
                    format!(
                        "STS AssumeRole of {} for node {node_id} failed",
                        self.role_arn
                    ),
                    err,
                )
            })?;
        let Some(credentials) = output.credentials() else {
            return Err(CredentialError::bare(format!(
                "STS AssumeRole of {} returned no credentials",
                self.role_arn
            )));
        };
        let expires_at_ms = credentials
            .expiration()
            .to_millis()
            .ok()
            .and_then(|ms| u64::try_from(ms).ok())
            .unwrap_or(0);
        Ok(QueueCredentials {
            access_key_id: credentials.access_key_id().to_owned(),
            secret_access_key: credentials.secret_access_key().to_owned(),
            session_token: credentials.session_token().to_owned(),
            expires_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_policy_allows_four_queue_actions_on_one_queue_only() {
        let arn = "arn:aws:sqs:eu-west-1:123456789012:app-node-n1";
        let policy: serde_json::Value = serde_json::from_str(&queue_session_policy(arn)).unwrap();
        let statements = policy["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 1, "{policy}");
        let statement = &statements[0];
        assert_eq!(statement["Effect"], "Allow");
        assert_eq!(
            statement["Resource"], arn,
            "exactly this queue, no wildcard"
        );
        let actions: Vec<&str> = statement["Action"]
            .as_array()
            .unwrap()
            .iter()
            .map(|action| action.as_str().unwrap())
            .collect();
        assert_eq!(actions, NODE_QUEUE_ACTIONS);
        assert!(
            !actions
                .iter()
                .any(|action| action.contains('*') || *action == "sqs:SendMessage"),
            "{actions:?}"
        );
        assert_eq!(policy["Version"], "2012-10-17");
    }

    #[test]
    fn queue_urls_map_to_arns_with_the_region_from_the_host_or_the_default() {
        assert_eq!(
            queue_arn_from_url(
                "https://sqs.eu-west-1.amazonaws.com/123456789012/app-node-n1",
                Some("us-east-1")
            )
            .as_deref(),
            Some("arn:aws:sqs:eu-west-1:123456789012:app-node-n1")
        );
        assert_eq!(
            queue_arn_from_url(
                "http://127.0.0.1:5055/123456789012/node-n1",
                Some("us-east-1")
            )
            .as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:node-n1")
        );
        assert_eq!(
            queue_arn_from_url("http://127.0.0.1:5055/123456789012/node-n1", None),
            None,
            "no region anywhere"
        );
    }

    #[test]
    fn anything_but_a_queue_url_is_refused() {
        for bad in [
            "",
            "node-n1",
            "https://sqs.eu-west-1.amazonaws.com/123456789012",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/a/b",
            "https://sqs.eu-west-1.amazonaws.com/12345/node",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/*",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/node-*",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/a\"b",
        ] {
            assert_eq!(queue_arn_from_url(bad, Some("us-east-1")), None, "{bad:?}");
        }
    }

    #[test]
    fn session_names_fit_sts() {
        assert_eq!(session_name("n1"), "clawless-node-n1");
        let long = session_name(&"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_eq!(session_name("a b/ü"), "clawless-node-a-b--");
    }
}
