//! `StsQueueCredentials` through the real AWS SDK against `moto_server` on loopback (started
//! by `infra/test`). moto accepts `AssumeRole` but does not enforce IAM, so these tests pin
//! what is sent (the session policy names exactly one queue; the lifetime is clamped) and that
//! the vended credentials work for receiving from that queue through a fresh client.
//! These tests fail, never skip, when the emulator is not there.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_sts::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_sts::config::{ConfigBag, Credentials, Intercept, RuntimeComponents};
use aws_sdk_sts::error::BoxError;
use clawless_aws::sts::NODE_QUEUE_ACTIONS;
use clawless_aws::testing::{
    moto_sdk_config, moto_sdk_config_with, sqs_client, unique_queue_prefix,
};
use clawless_aws::{SqsExecQueue, StsQueueCredentials};
use clawless_core::nodes::{ExecQueue, QueueCredentialVendor};

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/clawless-node-queues";

/// Keeps the body of every request a client sends.
#[derive(Debug, Clone, Default)]
struct BodyRecorder {
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Intercept for BodyRecorder {
    fn name(&self) -> &'static str {
        "test::BodyRecorder"
    }

    fn read_before_transmit(
        &self, context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents, _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = context.request().body().bytes().unwrap_or_default();
        self.bodies
            .lock()
            .expect("the recorder is never poisoned")
            .push(String::from_utf8_lossy(body).into_owned());
        Ok(())
    }
}

/// The value of `name` in a form-encoded body.
fn form_value(body: &str, name: &str) -> Option<String> {
    body.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| percent_decode(value))
    })
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).expect("ASCII hex");
                out.push(u8::from_str_radix(hex, 16).expect("a hex byte"));
                index += 3;
            }
            b'+' => {
                out.push(b' ');
                index += 1;
            }
            byte => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(out).expect("form values are UTF-8")
}

fn wall_ms() -> u64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(elapsed.as_millis()).expect("milliseconds fit u64")
}

#[tokio::test]
async fn vended_credentials_are_scoped_to_one_queue_and_can_receive_from_it() {
    // GIVEN a node queue holding a job, and a vendor whose STS requests are recorded
    let config = moto_sdk_config().await;
    let sqs = sqs_client(&config);
    let queues = SqsExecQueue::new(sqs, unique_queue_prefix());
    let queue_url = queues.create_node_queue("n1").await.unwrap();
    let other_url = queues.create_node_queue("n2").await.unwrap();
    queues.send(&queue_url, "signed job").await.unwrap();
    let recorder = BodyRecorder::default();
    let sts = aws_sdk_sts::Client::from_conf(
        aws_sdk_sts::config::Builder::from(&config)
            .interceptor(recorder.clone())
            .build(),
    );
    let vendor = StsQueueCredentials::new(sts, ROLE_ARN);

    // WHEN credentials are vended for half an hour
    let before = wall_ms();
    let credentials = vendor
        .vend("n1", &queue_url, Duration::from_secs(1_800))
        .await
        .unwrap();

    // THEN the request assumed the role for this node, for 30 minutes, with a policy naming
    // only this queue
    let bodies = recorder.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let body = &bodies[0];
    assert_eq!(form_value(body, "Action").as_deref(), Some("AssumeRole"));
    assert_eq!(form_value(body, "RoleArn").as_deref(), Some(ROLE_ARN));
    assert_eq!(
        form_value(body, "RoleSessionName").as_deref(),
        Some("clawless-node-n1")
    );
    assert_eq!(form_value(body, "DurationSeconds").as_deref(), Some("1800"));
    let policy: serde_json::Value =
        serde_json::from_str(&form_value(body, "Policy").expect("a session policy")).unwrap();
    let queue_name = queue_url.rsplit('/').next().unwrap();
    let statements = policy["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 1);
    assert_eq!(
        statements[0]["Resource"],
        format!("arn:aws:sqs:us-east-1:123456789012:{queue_name}"),
        "the one queue"
    );
    assert_eq!(
        statements[0]["Action"],
        serde_json::json!(NODE_QUEUE_ACTIONS)
    );
    let other_name = other_url.rsplit('/').next().unwrap();
    assert!(!body.contains(other_name), "no other node's queue");

    // AND the credentials are complete and expire within the hour
    assert!(!credentials.access_key_id.is_empty());
    assert!(!credentials.secret_access_key.is_empty());
    assert!(!credentials.session_token.is_empty());
    assert!(
        credentials.expires_at_ms > before && credentials.expires_at_ms <= before + 3_700_000,
        "{} vs {before}",
        credentials.expires_at_ms
    );

    // AND a fresh client signed with them receives the job
    let vended = moto_sdk_config_with(Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.clone(),
        Some(credentials.session_token.clone()),
        None,
        "vended",
    ));
    let node_side = SqsExecQueue::new(sqs_client(&vended), "");
    let jobs = node_side
        .receive(
            &queue_url,
            10,
            Duration::from_secs(2),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].body, "signed job");
    node_side
        .delete(&queue_url, &jobs[0].receipt)
        .await
        .unwrap();
}

#[tokio::test]
async fn lifetimes_are_clamped_and_non_queue_urls_are_refused_before_any_request() {
    let config = moto_sdk_config().await;
    let recorder = BodyRecorder::default();
    let sts = aws_sdk_sts::Client::from_conf(
        aws_sdk_sts::config::Builder::from(&config)
            .interceptor(recorder.clone())
            .build(),
    );
    let vendor = StsQueueCredentials::new(sts, ROLE_ARN);
    let url = "http://127.0.0.1:1/123456789012/app-node-n1";
    vendor
        .vend("n1", url, Duration::from_secs(60))
        .await
        .unwrap();
    vendor
        .vend("n1", url, Duration::from_secs(86_400))
        .await
        .unwrap();
    let refused = vendor.vend("n1", "node-n1", Duration::from_secs(900)).await;
    assert!(refused.is_err());
    let durations: Vec<String> = recorder
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter_map(|body| form_value(body, "DurationSeconds"))
        .collect();
    assert_eq!(durations, vec!["900", "3600"], "one request per valid vend");
}
