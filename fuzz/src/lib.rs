//! Shared bodies of the fuzz targets; see `harness` (and `sealed`, the
//! records that open with a key log; `quic`, the QUIC Initial packets that
//! open with keys anyone can derive).

pub mod harness;
pub mod quic;
pub mod sealed;
