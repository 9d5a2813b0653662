//! AWS clients configured from the environment, built once at start-up, and the TLS trust
//! the Lambda functions' AWS clients use ([`AwsTrust`]).

use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;

/// Set to `system` to make the functions' AWS clients trust the system's root certificates
/// instead of Amazon's own roots only (e.g. behind a proxy that re-signs TLS, or with an
/// HTTPS endpoint override served under another CA).
pub const AWS_TRUST_VAR: &str = "CLAWLESS_AWS_TRUST";

/// Amazon Trust Services' roots, which AWS service endpoints' certificates chain to: Amazon
/// Root CA 1–4 and Starfield Services Root Certificate Authority – G2 (which cross-signs
/// them), as Mozilla's CA list ships them.
pub const AMAZON_ROOTS_PEM: &str = include_str!("amazon-trust-services-roots.pem");

/// Which root certificates a Lambda function's AWS clients trust.
///
/// Stricter than the SDK's default, and cheaper: a function's AWS clients only ever speak to
/// AWS (model APIs and chat platforms go through `clawless-http`), so they trust Amazon Trust
/// Services' five roots instead of every root the system holds, and a cold start parses five certificates instead of reading and parsing the
/// system's whole store (about 1.3 ms on an Amazon Linux 2023 layout, 4–5 ms on Debian's).
/// The CLI, which runs on people's machines, keeps the system's roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsTrust {
    /// Amazon Trust Services' roots only ([`AMAZON_ROOTS_PEM`]).
    AmazonRoots,
    /// The system's root certificates (the SDK's default).
    System,
}

impl AwsTrust {
    /// [`AwsTrust::System`] when [`AWS_TRUST_VAR`] is `system`, else Amazon's roots.
    pub fn from_env() -> Self {
        Self::from_setting(std::env::var(AWS_TRUST_VAR).ok().as_deref())
    }

    /// [`AwsTrust::System`] for `system` (any case, trimmed), else Amazon's roots.
    pub fn from_setting(setting: Option<&str>) -> Self {
        match setting {
            Some(value) if value.trim().eq_ignore_ascii_case("system") => Self::System,
            _ => Self::AmazonRoots,
        }
    }

    /// The HTTP client that applies this trust; `None` leaves the SDK's default (the system's
    /// roots).
    pub fn http_client(self) -> Option<SharedHttpClient> {
        match self {
            Self::System => None,
            Self::AmazonRoots => {
                let context = TlsContext::builder()
                    .with_trust_store(TrustStore::empty().with_pem_certificate(AMAZON_ROOTS_PEM))
                    .build();
                match context {
                    Ok(context) => Some(
                        aws_smithy_http_client::Builder::new()
                            .tls_provider(tls::Provider::Rustls(
                                tls::rustls_provider::CryptoMode::AwsLc,
                            ))
                            .tls_context(context)
                            .build_https(),
                    ),
                    Err(err) => {
                        tracing::warn!(error = %err, "Amazon's roots unusable; AWS clients trust the system's roots");
                        None
                    }
                }
            }
        }
    }

    /// An SDK configuration loader that applies this trust.
    pub fn sdk_loader(self) -> aws_config::ConfigLoader {
        let loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        match self.http_client() {
            Some(client) => loader.http_client(client),
            None => loader,
        }
    }
}

/// The SDK configuration loader of a Lambda function: [`AwsTrust::from_env`]'s trust, and the
/// region and credentials Lambda puts in every function's environment (`AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) named directly. The
/// SDK's default chains would find them there first too, but building those chains builds
/// their other providers as well (an STS client for web identity, IMDS clients), about half a
/// millisecond of every cold start. Without them in the environment, the default chains.
pub fn function_sdk_loader() -> aws_config::ConfigLoader {
    let mut loader = AwsTrust::from_env().sdk_loader();
    if let Some(region) = non_blank_env("AWS_REGION") {
        loader = loader.region(aws_config::Region::new(region));
    }
    if non_blank_env("AWS_ACCESS_KEY_ID").is_some()
        && non_blank_env("AWS_SECRET_ACCESS_KEY").is_some()
    {
        loader = loader.credentials_provider(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        );
    }
    loader
}

/// The environment variable `name`, unless unset or blank.
pub(crate) fn non_blank_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Set to `true` to address buckets by path (needed by S3 emulators on 127.0.0.1).
pub const FORCE_PATH_STYLE_VAR: &str = "CLAWLESS_S3_FORCE_PATH_STYLE";

/// An S3 client from the standard AWS environment (`AWS_REGION`, credentials,
/// `AWS_ENDPOINT_URL_S3`…), path-style when [`FORCE_PATH_STYLE_VAR`] is `true`.
pub async fn s3_client_from_env() -> aws_sdk_s3::Client {
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    s3_client_from(&shared)
}

/// An S3 client from an already loaded AWS configuration, path-style when
/// [`FORCE_PATH_STYLE_VAR`] is `true`.
pub fn s3_client_from(shared: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let force_path_style = std::env::var(FORCE_PATH_STYLE_VAR)
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    let config = aws_sdk_s3::config::Builder::from(shared)
        .force_path_style(force_path_style)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}
