//! Synthetic HTTP conversations (being written).
