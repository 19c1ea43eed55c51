//! Integration tests: one test binary running the real `handshakes` binary on
//! synthetic captures (built in tests/support with exact timestamps), on the
//! real captures in captures/, and on the peer corpus in ../shared/corpus.

mod beside_http2;
mod captures;
mod certificates;
mod compare_many;
mod corpus;
mod csv_rows;
mod docs;
mod fragments;
mod fuzz_regressions;
mod go_pool;
mod h2_limits;
mod h2_sizes;
mod hosts;
mod http;
mod idle_close;
mod keylog;
#[cfg(feature = "live")]
mod live;
mod malformed;
mod markdown;
mod merge;
mod not_resumed;
mod opened_while_idle;
mod over_time;
mod overlays;
mod progress;
mod properties;
mod quic;
mod ratelimit;
mod report;
mod request_stats;
mod retry_across;
mod retry_after;
mod sealed;
mod servers;
mod setup_phases;
mod support;
mod synthetic;
mod threads;
mod tls;
mod tools;
mod tshark;
mod tunnels;
