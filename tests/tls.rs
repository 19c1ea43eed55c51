//! Synthetic TLS conversations (being written).
