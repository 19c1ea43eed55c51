//! The QPACK reader on field sections and encoder instructions built here
//! byte by byte: statuses, methods and paths from the static table,
//! literals (plain and Huffman-coded) and the dynamic table, and what is
//! none of them.

use super::*;

/// A HEADERS frame with the field section prefix 0, 0 and `lines`.
fn headers(lines: &[u8]) -> Vec<u8> {
    [&[0x01, 2 + lines.len() as u8, 0, 0][..], lines].concat()
}

#[test]
fn statuses_static_literal_and_huffman_coded() {
    // Indexed static 25 (:status 200).
    assert_eq!(status(&headers(&[0xc0 | 25])), Some(200));
    // Indexed static 71 (:status 500), index past the 6-bit prefix.
    assert_eq!(status(&headers(&[0xff, 71 - 63])), Some(500));
    // Literal with static name reference 24 (:status), value "429".
    assert_eq!(
        status(&headers(&[0x5f, 24 - 15, 3, b'4', b'2', b'9'])),
        Some(429)
    );
    // The same, Huffman-coded: '4' 011010, '2' 00010, '9' 011111, EOS
    // padding: 0110 1000 0100 1111 11 + 111111 = 0x68 0x4f 0xff.
    assert_eq!(
        status(&headers(&[0x5f, 24 - 15, 0x83, 0x68, 0x4f, 0xff])),
        Some(429)
    );
    // A literal name ":status".
    let mut lines = vec![0x27, 0x00];
    lines.extend_from_slice(b":status");
    lines.extend_from_slice(&[3, b'2', b'0', b'4']);
    assert_eq!(status(&headers(&lines)), Some(204));
    // After another static field.
    assert_eq!(status(&headers(&[0xc0 | 31, 0xc0 | 27])), Some(404));
}

#[test]
fn statuses_from_the_dynamic_table() {
    let mut d = Decoder::default();
    // The encoder stream: its type (0x02), a capacity of 4 096, then
    // :status 429 inserted with a static name reference (24), and a
    // literal `x-a: b`; split over two frames.
    let stream = [
        0x02,
        0x3f,
        0xe1,
        0x1f,
        0xc0 | 24,
        3,
        b'4',
        b'2',
        b'9',
        0x43,
        b'x',
        b'-',
        b'a',
        1,
        b'b',
    ];
    d.uni_stream(3, 0, &stream[..6]);
    d.uni_stream(3, 6, &stream[6..]);
    assert_eq!((d.inserted, d.max_capacity), (2, 4096));
    // A field section with Required Insert Count 2 (encoded 3), Base 2:
    // the entry before the base twice removed is :status 429 …
    assert_eq!(status_with(&d, &headers_with(3, 0x00, &[0x81])), Some(429));
    // … so is the post-base index 0 with Base 0 (S set, delta 1: 2 − 1 − 1).
    assert_eq!(status_with(&d, &headers_with(3, 0x81, &[0x10])), Some(429));
    // The other entry is no status; an entry not seen yet tells none.
    assert_eq!(status_with(&d, &headers_with(3, 0x00, &[0x80])), None);
    assert_eq!(status_with(&d, &headers_with(3, 0x00, &[0x11])), None);
    // A piece ahead of its turn on the encoder stream waits for the gap
    // to be filled: :status 200 (static 25, empty value) twice, the
    // second piece first.
    d.uni_stream(3, 17, &[0xc0 | 25, 0]);
    assert_eq!(d.inserted, 2);
    d.uni_stream(3, 15, &[0xc0 | 25, 0]);
    assert_eq!(d.inserted, 4);
    // One that cannot be held (past the bytes pending allowed) ends what
    // the table knows.
    d.uni_stream(3, 100, &vec![0; MAX_PENDING + 1]);
    d.uni_stream(3, 19, &[0xc0 | 25, 0]);
    assert_eq!(d.inserted, 4);
}

fn status_with(d: &Decoder, b: &[u8]) -> Option<u16> {
    d.fields(b).status
}

/// A HEADERS frame with Required Insert Count `ric` (encoded), the
/// delta-base byte `base` and `lines`.
fn headers_with(ric: u8, base: u8, lines: &[u8]) -> Vec<u8> {
    [&[0x01, 2 + lines.len() as u8, ric, base][..], lines].concat()
}

#[test]
fn anything_else_is_no_status() {
    assert_eq!(status(&[0x00, 0x03, 1, 2, 3]), None, "a DATA frame");
    assert_eq!(status(&headers(&[0x80 | 5])), None, "a dynamic entry");
    assert_eq!(status(&headers(&[0x5f, 9, 5, b'4', b'2'])), None, "cut");
    assert_eq!(
        status(&headers(&[0x5f, 9, 0x83, 0xff, 0xff, 0xff])),
        None,
        "EOS"
    );
    assert_eq!(
        status(&headers(&[0x5f, 9, 2, b'4', b'2'])),
        None,
        "two digits"
    );
    assert_eq!(
        status(&[0x01, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        None
    );
    assert_eq!(status(&[]), None);
}

/// A request's method and path.
fn request(d: &Decoder, b: &[u8]) -> (Option<String>, Option<String>) {
    let f = d.fields(b);
    (f.method.map(String::from), f.path.map(String::from))
}

fn some(method: &str, path: &str) -> (Option<String>, Option<String>) {
    (Some(method.into()), Some(path.into()))
}

#[test]
fn requests_static_literal_and_huffman_coded() {
    let d = Decoder::default();
    // :method GET (static 17), :scheme https (23), :path "/" (1).
    let lines = [0xc0 | 17, 0xc0 | 23, 0xc0 | 1];
    assert_eq!(request(&d, &headers(&lines)), some("GET", "/"));
    // :method POST (20), :path with a static name reference and the
    // literal "/api"; a reserved frame type (0x21) before the HEADERS.
    let lines = [0xc0 | 20, 0x51, 4, b'/', b'a', b'p', b'i'];
    let framed = [&[0x21, 0x01, 0xaa][..], &headers(&lines)].concat();
    assert_eq!(request(&d, &framed), some("POST", "/api"));
    // Huffman-coded "/a": '/' 011000, 'a' 00011, EOS padding 11111:
    // 0110 0000 0111 1111 = 0x60 0x7f.
    let lines = [0xc0 | 17, 0x51, 0x82, 0x60, 0x7f];
    assert_eq!(request(&d, &headers(&lines)), some("GET", "/a"));
    // A literal name ":method" with the value "PATCH", then a long
    // path, cut to MAX_TARGET characters.
    let mut lines = vec![0x27, 0x00];
    lines.extend_from_slice(b":method");
    lines.extend_from_slice(&[5, b'P', b'A', b'T', b'C', b'H']);
    // 300 past a 7-bit prefix: 127, then 173 in two bytes.
    lines.extend_from_slice(&[0x51, 0x7f, 0x80 | (173 & 0x7f), 173 >> 7]);
    lines.extend(std::iter::repeat_n(b'x', 300));
    let len = 2 + lines.len();
    let frame = [
        &[0x01, 0x40 | (len >> 8) as u8, len as u8, 0, 0][..],
        &lines,
    ]
    .concat();
    let (method, path) = request(&d, &frame);
    assert_eq!(method.as_deref(), Some("PATCH"));
    assert_eq!(path.map(|p| p.len()), Some(MAX_TARGET));
    // A DATA frame first, or no frame at all: nothing.
    assert_eq!(request(&d, &[0x00, 0x01, 0xc0 | 17]), (None, None));
    assert_eq!(request(&d, &[]), (None, None));
}

#[test]
fn requests_from_the_dynamic_table_and_duplicates() {
    let mut d = Decoder::default();
    // The client's encoder stream (type 0x02, on stream 2): capacity
    // 4 096; `:path /v1/items` with a static name reference (1);
    // `:method` with a literal name and the value "PURGE"; a duplicate
    // of the path (relative index 1).
    let mut stream = vec![0x02, 0x3f, 0xe1, 0x1f, 0xc0 | 1, 9];
    stream.extend_from_slice(b"/v1/items");
    stream.extend_from_slice(&[0x47]);
    stream.extend_from_slice(b":method");
    stream.extend_from_slice(&[5]);
    stream.extend_from_slice(b"PURGE");
    stream.push(0x01);
    d.uni_stream(2, 0, &stream);
    assert_eq!(d.inserted, 3);

    // Required Insert Count 3 (encoded 4), Base 3: relative 1 is the
    // method (absolute 1), relative 0 the duplicated path (absolute 2).
    let lines = [0x81, 0x80];
    assert_eq!(
        request(&d, &headers_with(4, 0x00, &lines)),
        some("PURGE", "/v1/items")
    );
    // A literal value with a dynamic name reference (the path's name).
    let lines = [0x81, 0x42, 2, b'/', b'z'];
    assert_eq!(
        request(&d, &headers_with(4, 0x00, &lines)),
        some("PURGE", "/z")
    );
    // An entry whose text was forgotten (past the latest MAX_TEXTS)
    // tells its name, not its value.
    let start = stream.len() as u64;
    for next in start..start + MAX_TEXTS as u64 {
        d.uni_stream(2, next, &[0x00]); // duplicate the latest
    }
    let ric = u8::try_from(d.inserted + 1).unwrap_or(0);
    let base_delta = ric - 1 - 3; // Base 3
    let lines = [0x81, 0x80];
    let f = d.fields(&headers_with(ric, 0x80 | (base_delta - 1), &lines));
    assert_eq!((f.method, f.path), (None, None));
    assert!(d.text(2).is_none() && d.text(d.inserted - 1).is_some());
}

/// A response's `retry-after` and `date`: literal names, the static
/// `date` name (index 6), and a dynamic entry the encoder inserted.
#[test]
fn retry_after_and_date_literal_static_and_dynamic() {
    let text = |v: &Option<Box<str>>| v.as_deref().map(str::to_owned);
    // :status 429 (literal, static name 24), `retry-after: 1` with a
    // literal name, `date` with the static name 6.
    let mut lines = vec![0x5f, 24 - 15, 3, b'4', b'2', b'9', 0x27, 11 - 7];
    lines.extend_from_slice(b"retry-after");
    lines.extend_from_slice(&[1, b'1', 0x50 | 6, 29]);
    lines.extend_from_slice(b"Wed, 21 Oct 2015 07:28:00 GMT");
    let f = Decoder::default().fields(&headers(&lines));
    assert_eq!(f.status, Some(429));
    assert_eq!(text(&f.retry_after).as_deref(), Some("1"));
    assert_eq!(
        text(&f.date).as_deref(),
        Some("Wed, 21 Oct 2015 07:28:00 GMT")
    );
    // The server's encoder stream inserts `retry-after: 120` (a literal
    // name); a later response refers to it.
    let mut d = Decoder::default();
    let mut stream = vec![0x02, 0x3f, 0xe1, 0x1f, 0x40 | 11];
    stream.extend_from_slice(b"retry-after");
    stream.extend_from_slice(&[3, b'1', b'2', b'0']);
    d.uni_stream(3, 0, &stream);
    assert_eq!(d.inserted, 1);
    // Required Insert Count 1 (encoded 2), Base 1: :status 503
    // (static 28), then relative 0, the entry.
    let f = d.fields(&headers_with(2, 0x00, &[0xc0 | 28, 0x80]));
    assert_eq!(f.status, Some(503));
    assert_eq!(text(&f.retry_after).as_deref(), Some("120"));
    assert_eq!(f.date, None);
}
