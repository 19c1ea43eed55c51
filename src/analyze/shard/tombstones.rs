//! A shard's tombstones: the tuples of finalised connections it remembers
//! for [`TOMBSTONE`] of capture time, so that a stray packet of one counts
//! as `late_packet` instead of opening a connection. A tombstone is a
//! 64-bit hash of the tuple ([`tombstone`]) and the time it is forgotten.
//!
//! They are kept in *generations*, one per [`SPAN`] of capture time, and a
//! generation is dropped whole once its last tombstone is forgotten: no
//! queue in burial order (it was 16 bytes a tombstone, and a second table
//! that doubled in one piece), no timer. Whether a tombstone is still
//! remembered is decided when it is looked up, against the clock at that
//! packet, so the answer is exactly that of a timer firing at its time. At
//! 5 000 connections a second (600 000 tombstones) this holds about half
//! the memory the hash map and queue did.
//!
//! Does not decide when a tuple is buried or dug up: that is the shard's.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::FastHash;
use crate::analyze::TOMBSTONE;
use crate::flow::FlowKey;
use crate::time::Timestamp;

/// The capture time one generation gathers tombstones over: a quarter of
/// [`TOMBSTONE`], so at most a quarter more are held than are remembered.
const SPAN: Duration = Duration::from_secs(TOMBSTONE.as_secs() / 4);

/// A closed tuple's tombstone: a 64-bit hash of its key with a fixed seed
/// (the same in every run, so output never depends on chance). Two tuples
/// sharing one would make a stray packet of the second count as
/// `late_packet` instead of opening a connection: about one chance in 2^64
/// per pair, and harmless.
fn tombstone(key: &FlowKey) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x7e5b_0c2d).hash_one(key)
}

/// The tombstones buried during one [`SPAN`].
struct Generation {
    /// When the first was buried: the generation takes burials until
    /// [`SPAN`] after.
    opened: Timestamp,
    /// When the last one buried is forgotten (burials come in clock order,
    /// so no tombstone of the generation lives longer).
    last_forget: Timestamp,
    /// Each tombstone and when it is forgotten.
    forget: HashMap<u64, Timestamp, FastHash>,
}

/// A shard's tombstones.
pub(super) struct Tombstones {
    /// Oldest first.
    generations: VecDeque<Generation>,
    /// Tombstones held, some perhaps forgotten already (those of the oldest
    /// generation, until it is dropped).
    held: usize,
    /// The most held at once: beyond it a tuple is not buried.
    cap: usize,
}

impl Tombstones {
    /// Holding at most `cap` tombstones.
    pub(super) fn new(cap: usize) -> Tombstones {
        Tombstones {
            generations: VecDeque::new(),
            held: 0,
            cap,
        }
    }

    /// Remembers `key` for [`TOMBSTONE`] from `now` (a reading of the
    /// capture-wide clock, which never goes back), unless the cap is held.
    pub(super) fn bury(&mut self, key: &FlowKey, now: Timestamp) {
        self.drop_forgotten(now);
        if self.held >= self.cap {
            return;
        }
        let forget = now.after(TOMBSTONE);
        let young = match self.generations.back_mut() {
            Some(young) if now < young.opened.after(SPAN) => young,
            _ => {
                self.generations.push_back(Generation {
                    opened: now,
                    last_forget: forget,
                    forget: HashMap::default(),
                });
                let Some(young) = self.generations.back_mut() else {
                    return;
                };
                young
            }
        };
        young.last_forget = young.last_forget.max(forget);
        if young.forget.insert(tombstone(key), forget).is_none() {
            self.held += 1;
        }
    }

    /// Whether `key` is remembered at clock reading `now`.
    pub(super) fn holds(&self, key: &FlowKey, now: Timestamp) -> bool {
        if self.held == 0 {
            return false;
        }
        let stone = tombstone(key);
        // Newest first: a tuple reused soon after its close is the usual hit.
        self.generations
            .iter()
            .rev()
            .any(|g| g.forget.get(&stone).is_some_and(|&forget| forget > now))
    }

    /// Forgets `key` (a new connection took its tuple).
    pub(super) fn dig_up(&mut self, key: &FlowKey) {
        let stone = tombstone(key);
        for generation in &mut self.generations {
            if generation.forget.remove(&stone).is_some() {
                self.held -= 1;
            }
        }
    }

    /// Drops the generations whose every tombstone is forgotten by `now`.
    fn drop_forgotten(&mut self, now: Timestamp) {
        while let Some(old) = self.generations.front() {
            if old.last_forget > now {
                break;
            }
            self.held -= old.forget.len();
            self.generations.pop_front();
        }
    }

    /// Tombstones held (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> FlowKey {
        let a = format!("10.0.0.1:{port}").parse().expect("addr");
        let b = "10.0.0.2:443".parse().expect("addr");
        FlowKey::new(a, b)
    }

    fn secs(s: f64) -> Timestamp {
        Timestamp((s * 1e9) as i64)
    }

    #[test]
    fn a_tombstone_is_held_until_exactly_its_time() {
        let mut t = Tombstones::new(10);
        t.bury(&key(1), secs(10.0));
        assert!(t.holds(&key(1), secs(10.0)));
        assert!(t.holds(&key(1), secs(129.999_999_999)));
        assert!(!t.holds(&key(1), secs(130.0)));
        assert!(!t.holds(&key(2), secs(11.0)));
    }

    #[test]
    fn a_generation_goes_once_its_last_tombstone_is_forgotten() {
        let mut t = Tombstones::new(100);
        // One generation: burials over 30 s from its first.
        for s in 0..30 {
            t.bury(&key(s), secs(f64::from(s)));
        }
        assert_eq!(t.generations.len(), 1);
        // The next opens a second one.
        t.bury(&key(100), secs(30.0));
        assert_eq!(t.generations.len(), 2);
        // At 148.5 s the first generation's last tombstone (buried at 29 s)
        // is still remembered: nothing is dropped, though the older ones of
        // the generation are forgotten.
        t.bury(&key(101), secs(148.5));
        assert_eq!(t.held(), 32);
        assert!(t.holds(&key(29), secs(148.5)));
        assert!(!t.holds(&key(28), secs(148.5)));
        // At 149 s it is forgotten, and its generation dropped.
        t.bury(&key(102), secs(149.0));
        assert_eq!(t.held(), 3);
        assert!(!t.holds(&key(29), secs(149.0)));
        assert!(t.holds(&key(100), secs(149.0)));
    }

    #[test]
    fn a_tuple_buried_twice_is_held_until_the_later_time() {
        let mut t = Tombstones::new(10);
        t.bury(&key(1), secs(0.0));
        t.bury(&key(1), secs(100.0));
        assert_eq!(t.generations.len(), 2);
        assert!(t.holds(&key(1), secs(150.0)));
        assert!(!t.holds(&key(1), secs(220.0)));
        t.dig_up(&key(1));
        assert_eq!(t.held(), 0);
        assert!(!t.holds(&key(1), secs(150.0)));
    }

    #[test]
    fn beyond_the_cap_a_tuple_is_not_buried() {
        let mut t = Tombstones::new(2);
        t.bury(&key(1), secs(0.0));
        t.bury(&key(2), secs(1.0));
        t.bury(&key(3), secs(2.0));
        assert!(!t.holds(&key(3), secs(2.0)));
        assert_eq!(t.held(), 2);
        // Once their generation is dropped there is room again.
        t.bury(&key(4), secs(121.0));
        assert!(t.holds(&key(4), secs(121.0)));
        assert_eq!(t.held(), 1);
    }
}
