//! Shared bodies of the fuzz targets; see `harness` (and `sealed`, the
//! records that open with a key log).

pub mod harness;
pub mod sealed;
