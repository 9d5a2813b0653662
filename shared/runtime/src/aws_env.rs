//! AWS clients configured from the environment, built once at start-up.

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
