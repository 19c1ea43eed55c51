//! A shard's tombstones: the tuples of finalised connections it remembers
//! for [`TOMBSTONE`] of capture time, so that a stray packet of one counts
//! as `late_packet` instead of opening a connection. A tombstone is a
//! 64-bit hash of the tuple ([`Stone`]) and the millisecond it is forgotten
//! (its burial plus [`TOMBSTONE`], rounded up to the millisecond).
//!
//! They are kept in *generations*, one per [`SPAN`] of capture time, and a
//! generation is dropped whole once its last tombstone is forgotten: no
//! queue in burial order (it was 16 bytes a tombstone, and a second table
//! that doubled in one piece), no timer. Whether a tombstone is still
//! remembered is decided when it is looked up, against the clock at that
//! packet, so the answer is exactly that of a timer firing at its time
//! (whatever the number of shards, and whenever generations are dropped).
//! Within a generation a tombstone's time is kept as milliseconds after the
//! generation's first forgetting (two bytes: a generation spans 30 s), so
//! an entry of its map is 10 bytes — 11 with the map's control byte,
//! against 17 for a hash and a full timestamp: at 50 000 connections a
//! second (a million tombstones in 20 s) 27 → 18 MB.
//!
//! Does not decide when a tuple is buried or dug up: that is the shard's.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Duration;

use crate::analyze::TOMBSTONE;
use crate::flow::FlowKey;
use crate::time::Timestamp;

/// The capture time one generation gathers tombstones over: a quarter of
/// [`TOMBSTONE`], so at most a quarter more are held than are remembered.
const SPAN: Duration = Duration::from_secs(TOMBSTONE.as_secs() / 4);

/// Nanoseconds in the unit a tombstone's time is kept in.
const MILLI: i64 = 1_000_000;

/// A closed tuple's tombstone: a 64-bit hash of its key with a fixed seed
/// (the same in every run, so output never depends on chance). Two tuples
/// sharing one would make a stray packet of the second count as
/// `late_packet` instead of opening a connection: about one chance in 2^64
/// per pair, and harmless. Kept as bytes so that a map entry with it is
/// not padded to 16 bytes; being a hash already, it is its own hash in
/// the map ([`Itself`]).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stone([u8; 8]);

impl Stone {
    fn of(key: &FlowKey) -> Stone {
        use std::hash::BuildHasher;
        let hash = foldhash::fast::FixedState::with_seed(0x7e5b_0c2d).hash_one(key);
        Stone(hash.to_ne_bytes())
    }
}

impl Hash for Stone {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from_ne_bytes(self.0));
    }
}

/// The hasher of a map keyed by [`Stone`]: the stone, which is a hash.
#[derive(Default)]
struct Itself(u64);

impl Hasher for Itself {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used, by `Stone`; anything else is folded in
        // rather than ignored.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The tombstones buried during one [`SPAN`].
struct Generation {
    /// When the first was buried: the generation takes burials until
    /// [`SPAN`] after.
    opened: Timestamp,
    /// When the first one buried is forgotten (rounded up to the
    /// millisecond): the origin of the times in `forget`.
    base: Timestamp,
    /// When the last one buried is forgotten, likewise rounded (burials
    /// come in clock order, so no tombstone of the generation lives longer).
    last_forget: Timestamp,
    /// Each tombstone and when it is forgotten, in milliseconds after
    /// `base` (less than [`SPAN`], so at most 30 000).
    forget: HashMap<Stone, u16, BuildHasherDefault<Itself>>,
}

impl Generation {
    /// When the tombstone kept with `millis` is forgotten.
    fn at(&self, millis: u16) -> Timestamp {
        Timestamp(self.base.0.saturating_add(i64::from(millis) * MILLI))
    }
}

/// `t` rounded up to a whole millisecond (of the epoch), saturating.
fn ceil_milli(t: Timestamp) -> Timestamp {
    let rest = t.0.rem_euclid(MILLI);
    if rest == 0 {
        t
    } else {
        Timestamp(t.0.saturating_add(MILLI - rest))
    }
}

/// The kept time of a tombstone dug up (a new connection took its tuple):
/// the entry stays, so that a map never holds more entries than were
/// counted against the cap (a removal would leave a mark that still takes
/// room, and the map could double past the cap's table).
const DUG: u16 = u16::MAX;

/// The most tombstones, at most `cap`, that one generation's hash map
/// holds without doubling: seven eighths of a power of two (a map grows
/// when it is seven-eighths full). At the default cap of 500 000, 458 752:
/// a table of 2^19 slots (5.8 MB), where 500 000 took 2^20 (11.5 MB, and
/// 17.3 MB while it doubled). A small cap is kept as it is.
fn fitted(cap: usize) -> usize {
    const SMALL: usize = 1 << 14;
    if cap < SMALL {
        return cap;
    }
    let mut fits = SMALL / 8 * 7;
    while let Some(next) = fits.checked_mul(2).filter(|&next| next <= cap) {
        fits = next;
    }
    fits
}

/// A shard's tombstones.
pub(super) struct Tombstones {
    /// Oldest first.
    generations: VecDeque<Generation>,
    /// Tombstones held, some perhaps forgotten already (those of the oldest
    /// generation, until it is dropped) or dug up.
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
            cap: fitted(cap),
        }
    }

    /// Remembers `key` for [`TOMBSTONE`] from `now` (a reading of the
    /// capture-wide clock, which never goes back), unless the cap is held.
    pub(super) fn bury(&mut self, key: &FlowKey, now: Timestamp) {
        self.drop_forgotten(now);
        if self.held >= self.cap {
            return;
        }
        let forget = ceil_milli(now.after(TOMBSTONE));
        let young = match self.generations.back_mut() {
            Some(young) if now < young.opened.after(SPAN) => young,
            _ => {
                self.generations.push_back(Generation {
                    opened: now,
                    base: forget,
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
        // Under SPAN after `base` (ms), and the clamp only guards the type.
        let millis = forget.nanos_since(young.base) / MILLI;
        let millis = u16::try_from(millis.max(0)).unwrap_or(u16::MAX);
        if young.forget.insert(Stone::of(key), millis).is_none() {
            self.held += 1;
        }
    }

    /// Whether `key` is remembered at clock reading `now`.
    pub(super) fn holds(&self, key: &FlowKey, now: Timestamp) -> bool {
        if self.held == 0 {
            return false;
        }
        let stone = Stone::of(key);
        // Newest first: a tuple reused soon after its close is the usual hit.
        self.generations.iter().rev().any(|g| {
            g.forget
                .get(&stone)
                .is_some_and(|&millis| millis != DUG && g.at(millis) > now)
        })
    }

    /// Forgets `key` (a new connection took its tuple). Its entries stay,
    /// marked ([`DUG`]), and count against the cap until their generation
    /// goes.
    pub(super) fn dig_up(&mut self, key: &FlowKey) {
        let stone = Stone::of(key);
        for generation in &mut self.generations {
            if let Some(millis) = generation.forget.get_mut(&stone) {
                *millis = DUG;
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
    fn a_tombstone_is_forgotten_at_the_millisecond_above_its_time() {
        let mut t = Tombstones::new(10);
        // Buried at 10.000 000 5 s: forgotten at 130.001 s, not 130.000 000 5.
        t.bury(&key(1), Timestamp(10_000_000_500));
        assert!(t.holds(&key(1), Timestamp(130_000_000_500)));
        assert!(t.holds(&key(1), Timestamp(130_000_999_999)));
        // The answer does not depend on whether a burial dropped generations
        // in between (shards see different burials).
        t.bury(&key(2), Timestamp(130_000_999_999));
        assert!(t.holds(&key(1), Timestamp(130_000_999_999)));
        assert!(!t.holds(&key(1), Timestamp(130_001_000_000)));
        t.bury(&key(3), Timestamp(130_001_000_000));
        assert!(!t.holds(&key(1), Timestamp(130_001_000_000)));
        assert!(t.holds(&key(2), Timestamp(130_001_000_000)));
    }

    #[test]
    fn a_generation_keeps_its_times_within_two_bytes() {
        // A generation's last burial is forgotten just under SPAN after its
        // first: its time fits (and is not clamped).
        let mut t = Tombstones::new(10);
        t.bury(&key(1), secs(0.0));
        t.bury(&key(2), Timestamp(29_999_999_999));
        assert_eq!(t.generations.len(), 1);
        assert!(t.holds(&key(2), Timestamp(149_999_999_999)));
        assert!(!t.holds(&key(2), Timestamp(150_000_000_000)));
        assert!(!t.holds(&key(1), secs(120.0)));
        // An entry of a generation's map: a hash and two bytes, unpadded.
        assert_eq!(std::mem::size_of::<(Stone, u16)>(), 10);
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
        assert!(!t.holds(&key(1), secs(150.0)));
        assert!(!t.holds(&key(1), secs(10.0)));
        // The entries stay until their generations go, counted.
        assert_eq!(t.held(), 2);
        // Buried again, it is held again.
        t.bury(&key(1), secs(110.0));
        assert!(t.holds(&key(1), secs(150.0)));
        assert_eq!(t.held(), 2);
    }

    #[test]
    fn a_map_at_the_cap_never_doubles() {
        // Tuples reused (dug up) while the cap holds: a removed entry would
        // leave a mark that takes room, and the map doubled past the
        // table that holds the cap (17.3 MB at the peak for 500 000).
        let many = |i: u32| {
            let [_, a, b, c] = i.to_be_bytes();
            FlowKey::new(
                std::net::SocketAddr::from(([10, a, b, c], 40_000)),
                "10.0.0.2:443".parse().expect("addr"),
            )
        };
        let mut t = Tombstones::new(500_000);
        for i in 0..400_000 {
            t.bury(&many(i), secs(1.0));
        }
        for i in 0..100_000 {
            t.dig_up(&many(i));
        }
        for i in 400_000..700_000 {
            t.bury(&many(i), secs(2.0));
        }
        assert_eq!(t.held(), 458_752);
        assert!(t.holds(&many(458_751), secs(2.0)));
        assert!(!t.holds(&many(458_752), secs(2.0)));
        assert!(!t.holds(&many(0), secs(2.0)));
        let room: usize = t.generations.iter().map(|g| g.forget.capacity()).sum();
        assert_eq!(room, 458_752);
    }

    #[test]
    fn the_cap_fits_a_map_that_does_not_double() {
        assert_eq!(fitted(10), 10);
        assert_eq!(fitted((1 << 14) - 1), (1 << 14) - 1);
        assert_eq!(fitted(1 << 14), 14_336);
        assert_eq!(fitted(500_000), 458_752);
        assert_eq!(fitted(62_500), 57_344);
        assert_eq!(fitted(usize::MAX), 7 << (usize::BITS - 3));
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
