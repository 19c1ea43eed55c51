//! Shared bodies of the fuzz targets; see `harness`.

pub mod harness;
