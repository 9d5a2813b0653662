//! The function's routes: `GET /skills/bins`, behind the node-authentication seam.

use std::sync::Arc;

use axum::Router;
use clawless_runtime::SkillsService;
use clawless_runtime::routes::{OpenNodeAccess, skills_bins_router};

/// Every route this function serves.
pub(crate) fn router(skills: Arc<SkillsService>) -> Router {
    // Node hosts do not register yet; `OpenNodeAccess` is replaced by token checks then.
    skills_bins_router(skills, Arc::new(OpenNodeAccess))
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::{Request, StatusCode};
    use clawless_runtime::{ClawlessConfig, StoreFactory};
    use tower::ServiceExt;

    use super::*;

    fn skills_from(dir: &std::path::Path) -> Arc<SkillsService> {
        let yaml = format!("skills:\n  bundled: {}\n", dir.display());
        let config = ClawlessConfig::from_yaml(&yaml, "test").unwrap();
        let stores = StoreFactory::new(|| unreachable!("no S3 in this test"));
        Arc::new(SkillsService::new(config, &stores).unwrap())
    }

    fn write_skill(dir: &std::path::Path, name: &str, metadata: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let text =
            format!("---\nname: {name}\ndescription: {name} skill\nmetadata: {metadata}\n---\n");
        std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
    }

    #[tokio::test]
    async fn get_skills_bins_answers_the_sorted_union() {
        let dir = tempfile::tempdir().unwrap();
        write_skill(
            dir.path(),
            "one",
            r#"{"openclaw":{"requires":{"bins":["jq","gh"]}}}"#,
        );
        write_skill(
            dir.path(),
            "two",
            r#"{"openclaw":{"os":["darwin"],"requires":{"anyBins":["memo"]}}}"#,
        );
        let response = router(skills_from(dir.path()))
            .oneshot(Request::get("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json, serde_json::json!({"bins": ["gh", "jq", "memo"]}));
    }

    #[tokio::test]
    async fn other_paths_and_methods_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(skills_from(dir.path()));
        let post = app
            .clone()
            .oneshot(Request::post("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        let other = app
            .oneshot(Request::get("/skills").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn an_unreachable_store_is_an_opaque_500() {
        // GIVEN skills in a bucket whose endpoint refuses connections
        let s3 = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "test", "test", None, None, "static",
            ))
            .endpoint_url("http://127.0.0.1:1")
            .force_path_style(true)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .build();
        let stores = StoreFactory::with_s3_client(aws_sdk_s3::Client::from_conf(s3));
        let config =
            ClawlessConfig::from_yaml("skills:\n  bundled: s3://nowhere/skills\n", "test").unwrap();
        let skills = Arc::new(SkillsService::new(config, &stores).unwrap());
        // WHEN a node asks for bins
        let response = router(skills)
            .oneshot(Request::get("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        // THEN it gets a 500 that reveals nothing of the cause
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert_eq!(&body[..], br#"{"error":"internal error"}"#);
    }
}
