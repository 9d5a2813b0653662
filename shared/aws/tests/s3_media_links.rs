//! `S3MediaLinks` through the real AWS SDK against `moto_server` on loopback: a presigned URL
//! fetched with a plain HTTP client (no AWS credentials) serves the stored bytes with the
//! Content-Type the link names; keys outside `media/` get no link. (moto does not check
//! SigV4 signatures, so a forged link is S3's to refuse and is not tested here.) Fails,
//! never skips, without the emulator.

use clawless_aws::testing::{fresh_bucket, moto_sdk_config, s3_client};
use clawless_aws::{S3MediaLinks, S3ObjectStore};
use clawless_base::media_links::MediaLinks;
use clawless_base::object_store::{ObjectStore, PutCondition};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n a chart";

#[tokio::test]
async fn a_presigned_link_serves_the_file_to_anyone_holding_it() {
    let config = moto_sdk_config().await;
    let client = s3_client(&config);
    let bucket = fresh_bucket(&client, "media-links").await;
    let store = S3ObjectStore::new(client.clone(), bucket.clone());
    let key = "media/outbound/0123abcd.png";
    store
        .put(key, PNG.to_vec(), PutCondition::IfAbsent)
        .await
        .expect("put");
    let links = S3MediaLinks::new(client, bucket);
    let url = links.link(key, "image/png").await.expect("link");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(url.contains("X-Amz-Expires=86400"), "{url}");

    let response = reqwest::get(&url).await.expect("GET the link");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok()),
        Some("image/png")
    );
    assert_eq!(response.bytes().await.expect("body").as_ref(), PNG);

    // A link to a key that is not there serves nothing (S3 answers 403 rather than 404 to
    // a signer that may not list the bucket).
    let missing = links
        .link("media/outbound/none.png", "image/png")
        .await
        .expect("link");
    let status = reqwest::get(&missing).await.expect("GET").status().as_u16();
    assert!(matches!(status, 403 | 404), "{status}");
}

#[tokio::test]
async fn keys_outside_media_get_no_link() {
    let config = moto_sdk_config().await;
    let client = s3_client(&config);
    let links = S3MediaLinks::new(client, "any-bucket");
    for key in ["sessions/s1.json", "media/../sessions/s1.json", "media/"] {
        let refused = links.link(key, "application/json").await;
        assert!(refused.is_err(), "{key}: {refused:?}");
    }
}
