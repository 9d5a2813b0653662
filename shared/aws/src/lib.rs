//! clawless AWS adapters: the core's ports implemented on AWS services.
//!
//! - [`S3ObjectStore`]: the [`ObjectStore`](clawless_core::object_store::ObjectStore) port on
//!   one S3 bucket (skills, workspace files, large transcript blobs).
//!
//! This crate translates between the ports and the AWS SDK; it holds no agent logic. With the
//! `test-support` feature, `testing` connects SDK clients to the local AWS emulator.

mod s3;

pub use s3::S3ObjectStore;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
