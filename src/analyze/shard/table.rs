//! A shard's connection table: its connections by a hash of their 4-tuple
//! (`hashbrown`'s `HashTable`, named in this module only). The tuple is
//! kept in the connection, not beside it, so a slot is one pointer (it was
//! the 48-byte key and a pointer), and
//! what names a connection elsewhere (the linger and LRU queues) is a
//! [`Handle`]: the tuple's hash and the connection's id, 16 bytes instead
//! of a copy of the key and the id.
//!
//! Does not decide when connections come or go: that is the shard's.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::FastHash;
use crate::analyze::connection::Connection;
use crate::flow::FlowKey;

/// Names one connection of the table: its tuple's hash and its id (the
/// position of its first packet, which no other connection shares).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Handle {
    hash: u64,
    pub(super) id: u64,
}

/// The connections of a shard.
#[derive(Default)]
pub(super) struct Table {
    conns: HashTable<Box<Connection>>,
    hasher: FastHash,
}

impl Table {
    pub(super) fn len(&self) -> usize {
        self.conns.len()
    }

    /// The hash the table files tuple `key` under.
    pub(super) fn hash(&self, key: &FlowKey) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The connection on tuple `key` (whose [`Table::hash`] is `hash`).
    pub(super) fn get_mut(&mut self, hash: u64, key: &FlowKey) -> Option<&mut Connection> {
        let conn = self.conns.find_mut(hash, |c| c.key() == key)?;
        Some(&mut **conn)
    }

    /// Takes the connection on tuple `key` out of the table.
    pub(super) fn remove(&mut self, hash: u64, key: &FlowKey) -> Option<Box<Connection>> {
        let entry = self.conns.find_entry(hash, |c| c.key() == key).ok()?;
        Some(entry.remove().0)
    }

    /// Files `conn` (on a tuple with no connection, whose hash is `hash`).
    pub(super) fn insert(&mut self, hash: u64, conn: Box<Connection>) -> &mut Connection {
        let hasher = &self.hasher;
        let entry = self
            .conns
            .insert_unique(hash, conn, |c| hasher.hash_one(c.key()));
        entry.into_mut()
    }

    /// The handle of connection `id` on a tuple whose hash is `hash`.
    pub(super) fn handle(hash: u64, id: u64) -> Handle {
        Handle { hash, id }
    }

    /// The connection `handle` names, if it is still in the table.
    pub(super) fn get(&self, handle: Handle) -> Option<&Connection> {
        let conn = self.conns.find(handle.hash, |c| c.id == handle.id)?;
        Some(&**conn)
    }

    /// Takes the connection `handle` names out of the table, if it is there.
    pub(super) fn take(&mut self, handle: Handle) -> Option<Box<Connection>> {
        let entry = self
            .conns
            .find_entry(handle.hash, |c| c.id == handle.id)
            .ok()?;
        Some(entry.remove().0)
    }

    /// The handles of the connections for which `pick` holds, in no
    /// particular order.
    pub(super) fn handles(&self, pick: impl Fn(&Connection) -> bool) -> Vec<Handle> {
        self.conns
            .iter()
            .filter(|c| pick(c))
            .map(|c| Handle {
                hash: self.hash(c.key()),
                id: c.id,
            })
            .collect()
    }

    /// Empties the table and gives its memory back.
    pub(super) fn release(&mut self) {
        self.conns = HashTable::new();
    }
}
