//! clawless base: the ports and shared types every domain crate stands on.
//!
//! The object store port, time and calendar helpers, the clock and id ports, session keys and
//! chat references, the transcript and model-provider types, and the reply tokens. Nothing here
//! knows of a turn, a skill, a cron job or an exec policy: the domain crates (`clawless-exec`,
//! `clawless-skills`, `clawless-automation`) and the turn engine (`clawless-core`) build on it.

pub mod clock;
pub mod ids;
pub mod media;
pub mod media_lines;
pub mod media_links;
pub mod model;
pub mod object_store;
pub mod port_error;
pub mod reply_tokens;
pub mod session_key;
pub mod thinking;
pub mod time;
pub mod transcript;
pub mod wildcard;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
