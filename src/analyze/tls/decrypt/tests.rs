//! Records sealed here with the keys a key log's secrets give, opened by
//! the decrypter: sequence numbers, the order of TLS 1.3's keys, TLS 1.2's
//! nonces and associated data, and how failures and gaps are told. (The
//! key derivation itself is checked against OpenSSL and RFC 8448 in
//! `crypto`, and the whole against real captures and tshark in
//! tests/keylog.rs.)

use super::*;
use crate::analyze::tls::crypto::expand_label;

const RANDOM: [u8; 32] = [0x5a; 32];
const SERVER_RANDOM: [u8; 32] = [0xa5; 32];
const AES128: u16 = 0x1301;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn line(label: &str, secret: &[u8]) -> String {
    format!("{label} {} {}\n", hex(&RANDOM), hex(secret))
}

/// A decrypter past the ClientHello (random [`RANDOM`]) and a ServerHello
/// choosing `cipher` (TLS 1.2 unless `tls13`).
fn decrypter(log: &str, cipher: u16, tls13: bool) -> Decrypter {
    decrypter_with(log, cipher, tls13, 0x0303, &[])
}

/// The same with the ServerHello's `version` and `extensions`.
fn decrypter_with(
    log: &str,
    cipher: u16,
    tls13: bool,
    version: u16,
    extensions: &[u16],
) -> Decrypter {
    let mut d = Decrypter::new(Arc::new(KeyLog::from_text(log)));
    let hello: Vec<u8> = [&[3, 3][..], &RANDOM, &[0]].concat();
    d.client_hello(&hello);
    let server = ServerHelloFacts {
        cipher,
        legacy_version: version,
        random: SERVER_RANDOM.to_vec(),
        extensions: extensions.to_vec(),
        ..ServerHelloFacts::default()
    };
    d.server_hello(&server, tls13);
    d
}

/// A TLS 1.3 record body: `text` and its inner type `ty`, padded, sealed
/// with the key of `secret` as record `seq`.
fn seal13(secret: &[u8], seq: u64, ty: u8, text: &[u8]) -> Vec<u8> {
    seal13_as(AES128, secret, seq, ty, text)
}

/// `seal13` under the suite `cipher`.
fn seal13_as(cipher: u16, secret: &[u8], seq: u64, ty: u8, text: &[u8]) -> Vec<u8> {
    let key = Key::from_secret(suite(cipher).unwrap(), secret).unwrap();
    let mut inner = [text, &[ty, 0, 0, 0]].concat();
    let tag = key.aead.tag_len();
    let [hi, lo] = u16::try_from(inner.len() + tag).unwrap().to_be_bytes();
    let header = [23, 3, 3, hi, lo];
    assert!(key.aead.seal(&key.nonce(seq), &header, &mut inner));
    inner
}

fn open(d: &mut Decrypter, side: Side, ty: u8, mut body: Vec<u8>) -> (Opened, Vec<u8>) {
    let opened = d.open(side, ty, 0x0303, &mut body);
    let text = match &opened {
        Opened::Data(r) | Opened::Early(r) | Opened::Handshake(r) | Opened::Alert(r) => {
            body[r.clone()].to_vec()
        }
        Opened::Closed | Opened::Lost => Vec::new(),
    };
    (opened, text)
}

fn data(d: &mut Decrypter, side: Side, body: Vec<u8>) -> Vec<u8> {
    let (opened, text) = open(d, side, APPLICATION_DATA, body);
    assert!(matches!(opened, Opened::Data(_)), "{opened:?}");
    text
}

fn outcome(d: &Decrypter) -> (DecryptionOutcome, u64, u64) {
    let o = d.outcome().unwrap();
    (o.outcome, o.records_opened, o.records_failed)
}

const CLIENT_HS: [u8; 32] = [1; 32];
const SERVER_HS: [u8; 32] = [2; 32];
const CLIENT_APP: [u8; 32] = [3; 32];
const SERVER_APP: [u8; 32] = [4; 32];

fn tls13_log(handshake: bool) -> String {
    let mut log = line("CLIENT_TRAFFIC_SECRET_0", &CLIENT_APP)
        + &line("SERVER_TRAFFIC_SECRET_0", &SERVER_APP);
    if handshake {
        log += &line("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &CLIENT_HS);
        log += &line("SERVER_HANDSHAKE_TRAFFIC_SECRET", &SERVER_HS);
    }
    log
}

#[test]
fn tls13_opens_handshake_then_application_then_updated_keys() {
    // AES-128-GCM, AES-128-CCM and AES-128-CCM_8 (an 8-byte tag).
    for cipher in [AES128, 0x1304, 0x1305] {
        tls13_opens_handshake_then_application_then_updated_keys_with(cipher);
    }
}

fn tls13_opens_handshake_then_application_then_updated_keys_with(cipher: u16) {
    let seal13 = |secret: &[u8], seq, ty, text: &[u8]| seal13_as(cipher, secret, seq, ty, text);
    let mut d = decrypter(&tls13_log(true), cipher, true);
    let s = Side::Server;
    let c = Side::Client;
    // The server's flight under its handshake key, as records 0 and 1.
    assert_eq!(
        open(&mut d, s, 23, seal13(&SERVER_HS, 0, HANDSHAKE, b"EE")),
        (Opened::Handshake(0..2), b"EE".to_vec())
    );
    assert_eq!(
        open(&mut d, s, 23, seal13(&SERVER_HS, 1, HANDSHAKE, b"Fin")),
        (Opened::Handshake(0..3), b"Fin".to_vec())
    );
    // The client's Finished, then its requests under the application key.
    assert_eq!(
        open(&mut d, c, 23, seal13(&CLIENT_HS, 0, HANDSHAKE, b"Fin")).0,
        Opened::Handshake(0..3)
    );
    assert_eq!(
        data(
            &mut d,
            c,
            seal13(&CLIENT_APP, 0, APPLICATION_DATA, b"GET /a")
        ),
        b"GET /a"
    );
    assert_eq!(
        data(
            &mut d,
            c,
            seal13(&CLIENT_APP, 1, APPLICATION_DATA, b"GET /b")
        ),
        b"GET /b"
    );
    // The server's ticket and response, then a KeyUpdate: the next record
    // is under the updated secret, from sequence number 0.
    assert_eq!(
        open(&mut d, s, 23, seal13(&SERVER_APP, 0, HANDSHAKE, b"NST")).0,
        Opened::Handshake(0..3)
    );
    assert_eq!(
        data(&mut d, s, seal13(&SERVER_APP, 1, APPLICATION_DATA, b"200")),
        b"200"
    );
    let suite = suite(cipher).unwrap();
    let updated = expand_label(suite.hash, &SERVER_APP, "traffic upd", 32).unwrap();
    assert_eq!(
        data(&mut d, s, seal13(&updated, 0, APPLICATION_DATA, b"two")),
        b"two"
    );
    assert_eq!(
        data(&mut d, s, seal13(&updated, 1, APPLICATION_DATA, b"three")),
        b"three"
    );
    // A closing alert opens, and shows.
    assert_eq!(
        open(&mut d, c, 23, seal13(&CLIENT_APP, 2, ALERT, &[1, 0])),
        (Opened::Alert(0..2), vec![1, 0])
    );
    assert_eq!(outcome(&d), (DecryptionOutcome::Complete, 10, 0));
}

#[test]
fn tls13_without_handshake_secrets_still_reads_the_application() {
    let mut d = decrypter(&tls13_log(false), AES128, true);
    // The handshake's records stay closed, and that is no failure.
    assert_eq!(
        open(
            &mut d,
            Side::Server,
            23,
            seal13(&SERVER_HS, 0, HANDSHAKE, b"EE")
        )
        .0,
        Opened::Closed
    );
    assert_eq!(
        open(
            &mut d,
            Side::Client,
            23,
            seal13(&CLIENT_HS, 0, HANDSHAKE, b"Fin")
        )
        .0,
        Opened::Closed
    );
    assert_eq!(
        data(
            &mut d,
            Side::Client,
            seal13(&CLIENT_APP, 0, APPLICATION_DATA, b"GET")
        ),
        b"GET"
    );
    assert_eq!(
        data(
            &mut d,
            Side::Server,
            seal13(&SERVER_APP, 0, APPLICATION_DATA, b"200")
        ),
        b"200"
    );
    assert_eq!(outcome(&d), (DecryptionOutcome::Complete, 2, 0));
}

#[test]
fn wrong_secrets_fail_then_give_up_and_say_partial() {
    let mut d = decrypter(&tls13_log(true), AES128, true);
    let wrong = [9u8; 32];
    for seq in 0..u64::from(GIVE_UP) {
        let (opened, _) = open(
            &mut d,
            Side::Client,
            23,
            seal13(&wrong, seq, APPLICATION_DATA, b"x"),
        );
        assert_eq!(opened, Opened::Lost);
    }
    // Given up: even a record the right key sealed is not tried.
    let right = seal13(&CLIENT_HS, 0, HANDSHAKE, b"Fin");
    assert_eq!(open(&mut d, Side::Client, 23, right).0, Opened::Lost);
    assert!(d.active(), "the server's direction is still read");
    assert_eq!(
        data(
            &mut d,
            Side::Server,
            seal13(&SERVER_APP, 0, APPLICATION_DATA, b"ok")
        ),
        b"ok"
    );
    assert_eq!(
        outcome(&d),
        (DecryptionOutcome::Partial, 1, u64::from(GIVE_UP))
    );
}

#[test]
fn a_gap_loses_the_sequence_numbers() {
    let mut d = decrypter(&tls13_log(true), AES128, true);
    assert_eq!(
        data(
            &mut d,
            Side::Client,
            seal13(&CLIENT_APP, 0, APPLICATION_DATA, b"a")
        ),
        b"a"
    );
    d.gap(Side::Client);
    let after = seal13(&CLIENT_APP, 1, APPLICATION_DATA, b"b");
    assert_eq!(open(&mut d, Side::Client, 23, after).0, Opened::Lost);
    assert_eq!(outcome(&d).0, DecryptionOutcome::Partial);
}

/// TLS 1.2: the client's and server's keys and IVs from the key block.
fn key_block12(cipher: u16, master: &[u8]) -> [(Aead, Vec<u8>); 2] {
    let suite = suite(cipher).unwrap();
    let block = key_block(suite, 0x0303, master, &SERVER_RANDOM, &RANDOM).unwrap();
    block.map(|share| {
        (
            Aead::new(suite.aead().unwrap(), &share.key).unwrap(),
            share.iv,
        )
    })
}

/// A TLS 1.2 record body sealed as record `seq` of type `ty`.
fn seal12(cipher: u16, (key, iv): &(Aead, Vec<u8>), seq: u64, ty: u8, text: &[u8]) -> Vec<u8> {
    let mut aad = seq.to_be_bytes().to_vec();
    aad.push(ty);
    aad.extend([3, 3]);
    aad.extend(u16::try_from(text.len()).unwrap().to_be_bytes());
    let mut sealed = text.to_vec();
    if suite(cipher).unwrap().aead() == Some(Cipher::ChaCha20Poly1305) {
        let mut nonce: [u8; 12] = iv.as_slice().try_into().unwrap();
        for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        assert!(key.seal(&nonce, &aad, &mut sealed));
        return sealed;
    }
    // GCM: the 4-byte salt, then an explicit nonce sent before the text.
    let explicit = (seq ^ 0x0102_0304_0506_0708).to_be_bytes();
    let nonce: [u8; 12] = [iv.as_slice(), &explicit].concat().try_into().unwrap();
    assert!(key.seal(&nonce, &aad, &mut sealed));
    [&explicit[..], &sealed].concat()
}

#[test]
fn tls12_aead_suites_open_from_the_master_secret() {
    let master = [7u8; 48];
    // GCM, ChaCha20-Poly1305, RSA's GCM; CCM of RSA, ECDHE-ECDSA's CCM_8
    // and 256-bit CCM, DHE-RSA's 256-bit CCM_8.
    for cipher in [
        0xc02f, 0xc030, 0xcca8, 0x009c, 0xc09c, 0xc0ae, 0xc0ad, 0xc0a3,
    ] {
        let mut d = decrypter(&line("CLIENT_RANDOM", &master), cipher, false);
        let [client, server] = key_block12(cipher, &master);
        d.change_cipher_spec(Side::Client);
        d.change_cipher_spec(Side::Server);
        // Finished is record 0 of each side, the data follows.
        let fin = seal12(cipher, &client, 0, HANDSHAKE, b"finished");
        let (opened, text) = open(&mut d, Side::Client, HANDSHAKE, fin);
        assert!(matches!(opened, Opened::Handshake(_)), "{cipher:#x}");
        assert_eq!(text, b"finished");
        let get = seal12(cipher, &client, 1, APPLICATION_DATA, b"GET / HTTP/1.1");
        assert_eq!(data(&mut d, Side::Client, get), b"GET / HTTP/1.1");
        let fin = seal12(cipher, &server, 0, HANDSHAKE, b"finished");
        let (opened, _) = open(&mut d, Side::Server, HANDSHAKE, fin);
        assert!(matches!(opened, Opened::Handshake(_)));
        let ok = seal12(cipher, &server, 1, APPLICATION_DATA, b"HTTP/1.1 200");
        assert_eq!(data(&mut d, Side::Server, ok), b"HTTP/1.1 200");
        // A record under the other side's key does not open.
        let crossed = seal12(cipher, &server, 2, APPLICATION_DATA, b"x");
        assert_eq!(
            open(&mut d, Side::Client, APPLICATION_DATA, crossed).0,
            Opened::Lost
        );
        assert_eq!(outcome(&d), (DecryptionOutcome::Partial, 4, 1));
    }
}

#[test]
fn tls12_renegotiation_stops_the_opening() {
    let master = [7u8; 48];
    let mut d = decrypter(&line("CLIENT_RANDOM", &master), 0xc02f, false);
    d.change_cipher_spec(Side::Client);
    d.change_cipher_spec(Side::Client);
    let [client, _] = key_block12(0xc02f, &master);
    let get = seal12(0xc02f, &client, 0, APPLICATION_DATA, b"GET");
    assert_eq!(
        open(&mut d, Side::Client, APPLICATION_DATA, get).0,
        Opened::Lost
    );
    assert_eq!(outcome(&d).0, DecryptionOutcome::Partial);
}

#[test]
fn what_cannot_be_opened_is_told_apart() {
    // Before a ClientHello: nothing to say.
    let d = Decrypter::new(Arc::new(KeyLog::from_text("")));
    assert!(d.outcome().is_none());
    // A random the log does not have.
    let d = decrypter(
        &line("CLIENT_RANDOM", &[7; 48]).replace("5a5a", "5b5a"),
        0xc02f,
        false,
    );
    assert_eq!(outcome(&d).0, DecryptionOutcome::NoSecrets);
    // RC4, 3DES; a CBC suite in SSL 3.0, an AEAD suite in TLS 1.1.
    for (cipher, version) in [
        (0x0005, 0x0303),
        (0x000a, 0x0303),
        (0x002f, 0x0300),
        (0xc02f, 0x0302),
    ] {
        let d = decrypter_with(
            &line("CLIENT_RANDOM", &[7; 48]),
            cipher,
            false,
            version,
            &[],
        );
        assert_eq!(outcome(&d).0, DecryptionOutcome::Unsupported, "{cipher:#x}");
    }
    // Secrets the session cannot use: TLS 1.3's for a TLS 1.2 session, a
    // master secret for TLS 1.3, SHA-256-length secrets for a SHA-384
    // suite, handshake secrets without the application's.
    for (log, cipher, tls13) in [
        (tls13_log(true), 0xc02f, false),
        (line("CLIENT_RANDOM", &[7; 48]), AES128, true),
        (tls13_log(true), 0x1302, true),
        (
            line("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &CLIENT_HS),
            AES128,
            true,
        ),
    ] {
        let mut d = decrypter(&log, cipher, tls13);
        assert_eq!(outcome(&d).0, DecryptionOutcome::NoSecrets, "{cipher:#x}");
        assert!(!d.active());
        let (opened, _) = open(&mut d, Side::Client, 23, vec![0; 40]);
        assert_eq!(opened, Opened::Closed);
    }
}

#[test]
fn short_and_hostile_bodies_are_lost_not_panics() {
    let master = [7u8; 48];
    for (cipher, tls13, log) in [
        (0xc02f, false, line("CLIENT_RANDOM", &master)),
        (0xcca8, false, line("CLIENT_RANDOM", &master)),
        (AES128, true, tls13_log(true)),
    ] {
        let mut d = decrypter(&log, cipher, tls13);
        d.change_cipher_spec(Side::Client);
        for len in [0, 1, 7, 8, 15, 16, 17, 24, 100, 70_000] {
            let (opened, _) = open(&mut d, Side::Client, APPLICATION_DATA, vec![0xee; len]);
            assert_eq!(opened, Opened::Lost, "{cipher:#x} {len}");
        }
    }
}

#[test]
fn a_followed_log_gives_secrets_that_come_late() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.log");
    let log = Arc::new(KeyLog::open(std::slice::from_ref(&path), true).unwrap());
    let mut d = Decrypter::new(Arc::clone(&log));
    d.client_hello(&[&[3, 3][..], &RANDOM, &[0]].concat());
    let server = ServerHelloFacts {
        cipher: AES128,
        random: SERVER_RANDOM.to_vec(),
        ..ServerHelloFacts::default()
    };
    d.server_hello(&server, true);
    assert!(d.active(), "bodies are kept while the secrets may come");
    // The server's first sealed record goes by before the client logs.
    let ee = seal13(&SERVER_HS, 0, HANDSHAKE, b"EE");
    assert_eq!(open(&mut d, Side::Server, 23, ee).0, Opened::Closed);
    std::fs::write(&path, tls13_log(true)).unwrap();
    // The next is record 1 of the server's, and opens.
    let fin = seal13(&SERVER_HS, 1, HANDSHAKE, b"Fin");
    assert_eq!(open(&mut d, Side::Server, 23, fin).1, b"Fin");
    let get = seal13(&CLIENT_APP, 0, APPLICATION_DATA, b"GET");
    assert_eq!(data(&mut d, Side::Client, get), b"GET");
    // The one that went by was not read (the analysis holds such records
    // for the secrets, `held`; past its bounds they go by).
    assert_eq!(outcome(&d), (DecryptionOutcome::Partial, 2, 0));

    // Records that went by may cross into the next key: the server's
    // flight (2) and its first ticket under the application key go by;
    // the second ticket is found at the application key's record 1.
    let later = dir.path().join("later.log");
    let mut d = Decrypter::new(Arc::new(
        KeyLog::open(std::slice::from_ref(&later), true).unwrap(),
    ));
    d.client_hello(&[&[3, 3][..], &RANDOM, &[0]].concat());
    d.server_hello(&server, true);
    for body in [
        seal13(&SERVER_HS, 0, HANDSHAKE, b"EE"),
        seal13(&SERVER_HS, 1, HANDSHAKE, b"Fin"),
        seal13(&SERVER_APP, 0, HANDSHAKE, b"NST"),
    ] {
        assert_eq!(open(&mut d, Side::Server, 23, body).0, Opened::Closed);
    }
    std::fs::write(&later, tls13_log(true)).unwrap();
    let nst = seal13(&SERVER_APP, 1, HANDSHAKE, b"NST2");
    assert_eq!(open(&mut d, Side::Server, 23, nst).1, b"NST2");
    let ok = seal13(&SERVER_APP, 2, APPLICATION_DATA, b"200");
    assert_eq!(data(&mut d, Side::Server, ok), b"200");
    assert_eq!(outcome(&d), (DecryptionOutcome::Partial, 2, 0));

    // Secrets that never come: no secrets, after a bounded wait.
    let mut d = Decrypter::new(log);
    d.client_hello(&[&[3, 3][..], &[0x77; 32], &[0]].concat());
    d.server_hello(&server, true);
    for _ in 0..LOOK_LIMIT {
        assert_eq!(
            open(&mut d, Side::Client, 23, vec![0; 40]).0,
            Opened::Closed
        );
    }
    assert!(!d.active());
    assert_eq!(outcome(&d).0, DecryptionOutcome::NoSecrets);
}

#[test]
fn tls13_client_keys_begin_with_the_early_key_when_logged() {
    const CLIENT_EARLY: [u8; 32] = [5; 32];
    let log = tls13_log(true) + &line("CLIENT_EARLY_TRAFFIC_SECRET", &CLIENT_EARLY);
    let mut d = decrypter(&log, AES128, true);
    let c = Side::Client;
    // 0-RTT data and EndOfEarlyData under the early key, then Finished
    // under the handshake key, then the application's.
    let early = seal13(&CLIENT_EARLY, 0, APPLICATION_DATA, b"GET /early");
    assert_eq!(
        open(&mut d, c, 23, early),
        (Opened::Early(0..10), b"GET /early".to_vec())
    );
    let eoed = seal13(&CLIENT_EARLY, 1, HANDSHAKE, &[5, 0, 0, 0]);
    assert!(matches!(open(&mut d, c, 23, eoed).0, Opened::Handshake(_)));
    let fin = seal13(&CLIENT_HS, 0, HANDSHAKE, b"Fin");
    assert!(matches!(open(&mut d, c, 23, fin).0, Opened::Handshake(_)));
    let get = seal13(&CLIENT_APP, 0, APPLICATION_DATA, b"GET /late");
    assert_eq!(data(&mut d, c, get), b"GET /late");
    // The application key is not updated away from by mistake: the next
    // record is still the application key's.
    let again = seal13(&CLIENT_APP, 1, APPLICATION_DATA, b"again");
    assert_eq!(data(&mut d, c, again), b"again");
    assert_eq!(outcome(&d), (DecryptionOutcome::Complete, 5, 0));
}

#[test]
fn cbc_suites_open_from_the_master_secret_in_every_version() {
    use super::super::crypto::BLOCK;
    let master = [7u8; 48];
    for (cipher, version, etm) in [
        (0xc013, 0x0301, false),
        (0xc014, 0x0301, true),
        (0x002f, 0x0302, false),
        (0xc027, 0x0303, false),
        (0xc028, 0x0303, true),
        (0x0035, 0x0303, true),
    ] {
        let case = format!("{cipher:#x} {version:#x} etm {etm}");
        let extensions: &[u16] = if etm { &[23, 22] } else { &[23] };
        let log = line("CLIENT_RANDOM", &master);
        let mut d = decrypter_with(&log, cipher, false, version, extensions);
        let suite = suite(cipher).unwrap();
        let Protection::Cbc { mac, .. } = suite.protection else {
            panic!("{case}: not CBC")
        };
        let shares = key_block(suite, version, &master, &SERVER_RANDOM, &RANDOM).unwrap();
        let chained = version == 0x0301;
        for (side, share) in [Side::Client, Side::Server].into_iter().zip(shares) {
            d.change_cipher_spec(side);
            let block = Block::new(&share.key).unwrap();
            let mac = Mac::new(mac, &share.mac).unwrap();
            let mut iv: [u8; BLOCK] = share.iv.as_slice().try_into().unwrap();
            for (seq, ty, text) in [
                (0, HANDSHAKE, &b"finished"[..]),
                (1, APPLICATION_DATA, b"GET / HTTP/1.1\r\n\r\n"),
                (2, ALERT, &[1, 0]),
            ] {
                let ids = (seq, ty, version);
                let body = cbc::seal((&block, &mac), ids, (&mut iv, chained, etm), text, 1);
                let mut body = body;
                let opened = d.open(side, ty, version, &mut body);
                let range = match opened {
                    Opened::Data(r) | Opened::Handshake(r) | Opened::Alert(r) => r,
                    other => panic!("{case} {side:?} #{seq}: {other:?}"),
                };
                assert_eq!(&body[range], text, "{case} {side:?} #{seq}");
            }
        }
        assert_eq!(outcome(&d), (DecryptionOutcome::Complete, 6, 0), "{case}");
        // The other MAC order does not open.
        let mut d = decrypter_with(&log, cipher, false, version, &[]);
        if etm {
            d.change_cipher_spec(Side::Client);
            let [share, _] = key_block(suite, version, &master, &SERVER_RANDOM, &RANDOM).unwrap();
            let block = Block::new(&share.key).unwrap();
            let mac = Mac::new(mac, &share.mac).unwrap();
            let mut iv: [u8; BLOCK] = share.iv.as_slice().try_into().unwrap();
            let ids = (0, HANDSHAKE, version);
            let mut body = cbc::seal((&block, &mac), ids, (&mut iv, chained, true), b"fin", 0);
            let opened = d.open(Side::Client, HANDSHAKE, version, &mut body);
            assert_eq!(opened, Opened::Lost, "{case}");
        }
    }
}
