//! What a key log would tell, marked where it is missing: on every real
//! capture recorded with its key log (captures/), the summary read without
//! it against the summary read with it. `beside_http2.sealed` must cover
//! every connection the key log shows was needed (a stream limit or a
//! GOAWAY read from the frames), and `not_resumed.not_offered_after_sealed`
//! every full handshake it shows followed a server that issued no session
//! — and with the key log, nothing is sealed.

use std::path::Path;

use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, Summary};

/// The summary of `capture`, read with `keylog` or without keys.
fn summary(capture: &Path, keylog: Option<&Path>) -> Summary {
    let mut source = FileSource::open(capture).unwrap_or_else(|e| panic!("{e}"));
    let config = Config {
        keylog: keylog.map(crate::tools::keylog),
        ..Config::default()
    };
    analyze(&mut source, &config, &mut Vec::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// A count (and those of it sealed) without the key log against the same
/// with it: with it none is sealed, and it takes back at most the sealed
/// ones. Whether it took any back.
fn bounded(what: &str, (without, sealed): (u64, u64), (with, still): (u64, u64)) -> bool {
    assert_eq!(still, 0, "{what}: sealed with the key log");
    assert!(
        (without - sealed..=without).contains(&with),
        "{what}: {without} ({sealed} sealed) without keys, {with} with"
    );
    with < without
}

#[test]
fn what_the_key_log_would_change_is_marked_sealed_without_it() {
    let (mut beside_changed, mut not_resumed_changed, mut captures) = (0, 0, 0);
    for (name, pcap) in crate::tools::all_captures() {
        let keylog = pcap.with_extension("keylog");
        if !name.starts_with("captures/") || !keylog.exists() {
            continue;
        }
        captures += 1;
        let sealed = summary(&pcap, None);
        let opened = summary(&pcap, Some(&keylog));
        if let (Some(a), Some(b)) = (&sealed.beside_http2, &opened.beside_http2) {
            let what = format!("{name}: beside HTTP/2");
            let changed = bounded(&what, (a.connections, a.sealed), (b.connections, b.sealed));
            let needed = b.at_limit + b.after_goaway;
            assert!(
                needed <= a.sealed,
                "{name}: {needed} needed, {} sealed",
                a.sealed
            );
            beside_changed += u64::from(changed);
        }
        if let (Some(a), Some(b)) = (&sealed.not_resumed, &opened.not_resumed) {
            let what = format!("{name}: not offered");
            let (count, after) = (a.not_offered, a.not_offered_after_sealed);
            let with = (b.not_offered, b.not_offered_after_sealed);
            not_resumed_changed += u64::from(bounded(&what, (count, after), with));
        }
    }
    // The key log changes both on some (the stream-limit, GOAWAY and
    // no-ticket captures): the bounds above were tested, not vacuous.
    assert!(captures > 40, "only {captures} captures with a key log");
    assert!(
        beside_changed >= 3,
        "{beside_changed} changed beside HTTP/2"
    );
    assert!(not_resumed_changed >= 1, "{not_resumed_changed} changed");
}

/// The table says so beside its counts, and no longer once the key log
/// opened the frames and tickets.
#[test]
fn the_table_says_what_is_sealed() {
    let pcap = crate::h2_sizes::capture("h2-curl-stream-limit.pcap");
    let keylog = pcap.with_extension("keylog");
    let text = |keylog: Option<&Path>| {
        let s = summary(&pcap, keylog);
        let mut out = Vec::new();
        handshakes::report::table::write_summary(&s, &mut out).expect("written");
        String::from_utf8(out).expect("utf-8")
    };
    let sealed = text(None);
    assert!(
        sealed.contains("· HTTP/2 frames sealed: a stream limit or a GOAWAY may have made some needed (--keylog tells)"),
        "{sealed}"
    );
    let opened = text(Some(&keylog));
    assert!(!opened.contains("sealed"), "{opened}");
    let pcap = crate::h2_sizes::capture("tls13-python-requests-noticket-5.pcap");
    let s = summary(&pcap, None);
    let n = s.not_resumed.as_ref().expect("full handshakes");
    assert_eq!((n.not_offered, n.not_offered_after_sealed), (4, 4));
}
