//! `handshakes`: rebuild, for every TCP connection in a capture, its TCP
//! handshake, how it closed, and (in later stages) its TLS handshake and HTTP
//! requests.
//!
//! The pipeline runs one way:
//! `source` → `decode` → `flow` (connection table, TCP state) → `analyze`
//! (the per-connection driver) → `record` (the output contract) → `report`.

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod decode;
pub mod error;
pub mod record;
pub mod source;
pub mod time;
