//! Integration tests: every provider against the scripted server through the real HTTP
//! client (and, for Bedrock, the real AWS SDK client), plus retries, fallback, config and the
//! offline model. Only `127.0.0.1` is ever contacted.

mod anthropic;
mod bedrock;
mod config_env;
mod images;
mod offline;
mod openai;
mod resilience;
mod support;
mod thinking;
