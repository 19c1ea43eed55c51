//! The fingerprints of the last few distinct hellos, remembered per thread.
//! A capture of many short connections from one client repeats the same
//! ClientHello (and the server the same ServerHello) thousands of times,
//! and computing JA3, JA4 and JA3S — two MD5s, a SHA-256, sorting and hex
//! formatting — was a tenth of the time per connection. This is a memo of
//! a pure function: what it holds never changes an answer, only how soon
//! it comes. It holds at most [`KEPT`] hellos of each kind, so hostile
//! hellos that all differ cost a few comparisons more each, never memory.
//!
//! The answers are shared (`Arc`), not copied: a closed connection holds
//! its fingerprints while it lingers, and thousands of connections from one
//! client hold the same three strings.
//!
//! Does not compute a fingerprint itself (that is `hello`) nor decide
//! which hellos a connection has.

use std::cell::RefCell;
use std::sync::Arc;

use super::{non_grease, ClientHelloFacts, ServerHelloFacts};

/// A ClientHello's JA3 and JA4, shared by every connection that sent
/// the same hello.
pub type ClientPrints = Arc<(Arc<str>, Arc<str>)>;

/// Distinct hellos of each kind remembered (per thread).
const KEPT: usize = 32;

/// The last few hellos seen and what was computed from them, newest
/// replacing the oldest.
struct Recent<K, V> {
    entries: Vec<(K, V)>,
    /// The entry the next new one replaces, once `entries` is full.
    next: usize,
}

impl<K, V: Clone> Recent<K, V> {
    const fn new() -> Self {
        Recent {
            entries: Vec::new(),
            next: 0,
        }
    }

    /// The value remembered for a key that `same` accepts, or `compute`'s,
    /// remembered with `own()` as its key.
    fn get(
        &mut self,
        same: impl Fn(&K) -> bool,
        own: impl FnOnce() -> K,
        compute: impl FnOnce() -> V,
    ) -> V {
        if let Some((_, v)) = self.entries.iter().find(|(k, _)| same(k)) {
            return v.clone();
        }
        let v = compute();
        let entry = (own(), v.clone());
        if self.entries.len() < KEPT {
            self.entries.push(entry);
        } else if let Some(slot) = self.entries.get_mut(self.next) {
            *slot = entry;
            self.next = (self.next + 1) % KEPT;
        }
        v
    }
}

thread_local! {
    static CLIENT: RefCell<Recent<ClientHelloFacts, ClientPrints>> =
        const { RefCell::new(Recent::new()) };
    static SERVER: RefCell<Recent<ServerHelloFacts, Arc<str>>> =
        const { RefCell::new(Recent::new()) };
}

/// Whether `a` and `b` are the same once GREASE values are dropped (as
/// every fingerprint drops them: browsers pick new ones per connection).
fn same_list(a: &[u16], b: &[u16]) -> bool {
    non_grease(a).eq(non_grease(b))
}

/// Whether the fingerprints of `a` and `b` are computed from the same
/// values.
fn same_client(a: &ClientHelloFacts, b: &ClientHelloFacts) -> bool {
    a.legacy_version == b.legacy_version
        && same_list(&a.ciphers, &b.ciphers)
        && same_list(&a.extensions, &b.extensions)
        && same_list(&a.groups, &b.groups)
        && a.ec_point_formats == b.ec_point_formats
        && same_list(&a.signature_algorithms, &b.signature_algorithms)
        && a.max_version() == b.max_version()
        && a.alpn_raw.first() == b.alpn_raw.first()
}

/// A copy of the parts of `ch` its fingerprints are computed from.
fn client_part(ch: &ClientHelloFacts) -> ClientHelloFacts {
    let list = |l: &[u16]| non_grease(l).collect();
    ClientHelloFacts {
        legacy_version: ch.legacy_version,
        ciphers: list(&ch.ciphers),
        extensions: list(&ch.extensions),
        groups: list(&ch.groups),
        ec_point_formats: ch.ec_point_formats.clone(),
        signature_algorithms: list(&ch.signature_algorithms),
        supported_versions: vec![ch.max_version()],
        alpn_raw: ch.alpn_raw.first().cloned().into_iter().collect(),
        ..ClientHelloFacts::default()
    }
}

/// Whether the JA3S of `a` and `b` is computed from the same values.
fn same_server(a: &ServerHelloFacts, b: &ServerHelloFacts) -> bool {
    (a.legacy_version, a.cipher) == (b.legacy_version, b.cipher)
        && same_list(&a.extensions, &b.extensions)
}

impl ClientHelloFacts {
    /// [`ClientHelloFacts::ja3`] and [`ClientHelloFacts::ja4`], remembered
    /// for the last few distinct hellos.
    pub fn ja3_ja4(&self) -> ClientPrints {
        let compute = || Arc::new((Arc::from(self.ja3()), Arc::from(self.ja4())));
        let remembered = CLIENT.try_with(|recent| {
            let mut recent = recent.try_borrow_mut().ok()?;
            Some(recent.get(|k| same_client(k, self), || client_part(self), compute))
        });
        remembered.ok().flatten().unwrap_or_else(compute)
    }
}

impl ServerHelloFacts {
    /// [`ServerHelloFacts::ja3s`], remembered for the last few distinct
    /// hellos.
    pub fn ja3s_remembered(&self) -> Arc<str> {
        let compute = || Arc::from(self.ja3s());
        let remembered = SERVER.try_with(|recent| {
            let mut recent = recent.try_borrow_mut().ok()?;
            let own = || ServerHelloFacts {
                legacy_version: self.legacy_version,
                cipher: self.cipher,
                extensions: non_grease(&self.extensions).collect(),
                ..ServerHelloFacts::default()
            };
            Some(recent.get(|k| same_server(k, self), own, compute))
        });
        remembered.ok().flatten().unwrap_or_else(compute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered JA3 and JA4, as owned strings.
    fn both(ch: &ClientHelloFacts) -> (String, String) {
        let both = ch.ja3_ja4();
        (both.0.to_string(), both.1.to_string())
    }

    fn hello(n: u16) -> ClientHelloFacts {
        ClientHelloFacts {
            legacy_version: 0x0303,
            ciphers: vec![0x1301, 0x1302, n],
            extensions: vec![0, 10, 11, 13, 16, 43],
            groups: vec![29, 23],
            ec_point_formats: vec![0],
            signature_algorithms: vec![0x0403, 0x0804],
            supported_versions: vec![0x0304, 0x0303],
            alpn_raw: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            sni: Some(format!("host{n}.example")),
            ..ClientHelloFacts::default()
        }
    }

    #[test]
    fn remembered_fingerprints_are_the_computed_ones() {
        // More distinct hellos than are kept, each seen several times in
        // a changing order: every answer is the one computed afresh.
        for round in 0..4u16 {
            for n in 0..(3 * KEPT as u16) {
                let n = (n * 7 + round) % (3 * KEPT as u16);
                let ch = hello(0xc000 + n);
                assert_eq!(both(&ch), (ch.ja3(), ch.ja4()), "hello {n}");
                let sh = ServerHelloFacts {
                    legacy_version: 0x0303,
                    cipher: 0xc000 + n,
                    extensions: vec![43, 51],
                    ..ServerHelloFacts::default()
                };
                assert_eq!(*sh.ja3s_remembered(), *sh.ja3s(), "hello {n}");
            }
        }
    }

    #[test]
    fn each_fingerprinted_field_tells_hellos_apart() {
        let base = hello(1);
        let changes: [fn(&mut ClientHelloFacts); 8] = [
            |c| c.legacy_version = 0x0301,
            |c| c.ciphers.push(0x00ff),
            |c| c.extensions.reverse(),
            |c| c.groups.push(24),
            |c| c.ec_point_formats.push(1),
            |c| c.signature_algorithms.push(0x0401),
            |c| c.supported_versions = vec![0x0303],
            |c| c.alpn_raw.reverse(),
        ];
        assert_eq!(both(&base), (base.ja3(), base.ja4()));
        for (i, change) in changes.iter().enumerate() {
            let mut other = base.clone();
            change(&mut other);
            assert_eq!(both(&other), (other.ja3(), other.ja4()), "change {i}");
            assert_ne!(other.ja3_ja4(), base.ja3_ja4(), "change {i}");
        }
        // Nor GREASE values, which browsers pick anew per connection.
        let mut greased = base.clone();
        greased.ciphers.insert(0, 0x3a3a);
        greased.extensions.insert(2, 0xdada);
        greased.supported_versions.insert(0, 0x7a7a);
        assert_eq!(both(&greased), (greased.ja3(), greased.ja4()));
        assert_eq!(greased.ja3_ja4(), base.ja3_ja4());
        // The server name is no part of either fingerprint.
        let mut renamed = base.clone();
        renamed.sni = Some("elsewhere.example".into());
        assert_eq!(renamed.ja3_ja4(), base.ja3_ja4());
    }
}
