//! Byte building and the TLS messages of a handshake: records, ClientHello,
//! ServerHello, a synthetic X.509 chain, key exchanges, ChangeCipherSpec and
//! the TLS 1.2 Finished.
//!
//! Owns: [`Buf`] (length-prefixed blocks), the message builders, the cipher
//! lists and the record overheads.
//! Does not own: when a message is sent or how flights are cut into
//! segments (`plan.rs`, `flight.rs`, `conn.rs`).

use crate::rng::Rng;

/// TLS 1.3 record expansion: content type byte and a 16-byte AEAD tag.
pub(crate) const OVERHEAD_13: usize = 17;
/// TLS 1.2 AES-GCM record expansion: 8-byte explicit nonce and 16-byte tag.
pub(crate) const OVERHEAD_12: usize = 24;

// ---------------------------------------------------------------------------
// Byte building.

/// A growing message with length-prefixed sub-blocks.
#[derive(Default)]
pub(crate) struct Buf(pub(crate) Vec<u8>);

impl Buf {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    /// A block preceded by its length in `width` bytes.
    fn block(&mut self, width: usize, f: impl FnOnce(&mut Buf)) {
        let at = self.0.len();
        self.0.resize(at + width, 0);
        f(self);
        let len = (self.0.len() - at - width) as u32;
        let be = len.to_be_bytes();
        self.0[at..at + width].copy_from_slice(&be[4 - width..]);
    }
    fn len8(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(1, f);
    }
    fn len16(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(2, f);
    }
    fn len24(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(3, f);
    }
    /// A TLS extension: type and length-prefixed data.
    fn ext(&mut self, ty: u16, f: impl FnOnce(&mut Buf)) {
        self.u16(ty);
        self.len16(f);
    }
}

/// A TLS record around `body`.
pub(crate) fn record(content_type: u8, version: u16, body: &[u8]) -> Vec<u8> {
    let mut b = Buf::default();
    b.u8(content_type);
    b.u16(version);
    b.len16(|b| b.bytes(body));
    b.0
}

/// A handshake message: type, 24-bit length, body.
pub(crate) fn handshake(kind: u8, f: impl FnOnce(&mut Buf)) -> Vec<u8> {
    let mut b = Buf::default();
    b.u8(kind);
    b.len24(f);
    b.0
}

pub(crate) const CIPHERS_13: [u16; 3] = [0x1301, 0x1302, 0x1303];
const CIPHERS_12: [u16; 12] = [
    0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
];
const SIGNATURE_ALGORITHMS: [u16; 8] = [
    0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
];
const GREASE: [u16; 4] = [0x0a0a, 0x3a3a, 0x7a7a, 0xdada];

/// What a ClientHello offers.
pub(crate) struct Hello<'a> {
    pub(crate) sni: &'a str,
    pub(crate) alpn: &'a [&'a str],
    pub(crate) offer13: bool,
    pub(crate) session_id: &'a [u8],
    /// TLS 1.3 resumption: a pre_shared_key extension (last, as required).
    pub(crate) psk: bool,
    pub(crate) grease: bool,
}

pub(crate) fn client_hello(rng: &mut Rng, h: &Hello<'_>) -> Vec<u8> {
    let msg = handshake(1, |b| {
        b.u16(0x0303);
        b.bytes(&rng.bytes(32));
        b.len8(|b| b.bytes(h.session_id));
        let grease = *rng.pick(&GREASE);
        b.len16(|b| {
            if h.grease {
                b.u16(grease);
            }
            if h.offer13 {
                CIPHERS_13.iter().for_each(|&c| b.u16(c));
            }
            CIPHERS_12.iter().for_each(|&c| b.u16(c));
        });
        b.len8(|b| b.u8(0));
        b.len16(|b| {
            if h.grease {
                b.ext(grease, |_| {});
            }
            b.ext(0, |b| {
                b.len16(|b| {
                    b.u8(0);
                    b.len16(|b| b.bytes(h.sni.as_bytes()));
                })
            });
            b.ext(23, |_| {});
            b.ext(0xff01, |b| b.u8(0));
            b.ext(10, |b| {
                b.len16(|b| [0x001d, 0x0017, 0x0018].iter().for_each(|&g| b.u16(g)))
            });
            b.ext(11, |b| b.len8(|b| b.u8(0)));
            b.ext(35, |_| {});
            if !h.alpn.is_empty() {
                b.ext(16, |b| {
                    b.len16(|b| {
                        for p in h.alpn {
                            b.len8(|b| b.bytes(p.as_bytes()));
                        }
                    })
                });
            }
            b.ext(5, |b| {
                b.u8(1);
                b.u16(0);
                b.u16(0);
            });
            b.ext(13, |b| {
                b.len16(|b| SIGNATURE_ALGORITHMS.iter().for_each(|&s| b.u16(s)))
            });
            b.ext(18, |_| {});
            if h.offer13 {
                let key = rng.bytes(32);
                b.ext(51, |b| {
                    b.len16(|b| {
                        b.u16(0x001d);
                        b.len16(|b| b.bytes(&key));
                    })
                });
                b.ext(45, |b| b.len8(|b| b.u8(1)));
                b.ext(43, |b| {
                    b.len8(|b| {
                        b.u16(0x0304);
                        b.u16(0x0303);
                    })
                });
            }
            if h.psk {
                let n = rng.range(120, 240) as usize;
                let identity = rng.bytes(n);
                let age = rng.u32();
                let binder = rng.bytes(32);
                b.ext(41, |b| {
                    b.len16(|b| {
                        b.len16(|b| b.bytes(&identity));
                        b.u32(age);
                    });
                    b.len16(|b| b.len8(|b| b.bytes(&binder)));
                });
            }
        });
    });
    record(22, 0x0301, &msg)
}

/// ServerHello: TLS 1.3 with supported_versions and key_share (and
/// pre_shared_key when resumed); TLS 1.2 with the selected ALPN.
pub(crate) fn server_hello(
    rng: &mut Rng,
    session_id: &[u8],
    cipher: u16,
    v13: bool,
    psk: bool,
    alpn: Option<&str>,
) -> Vec<u8> {
    handshake(2, |b| {
        b.u16(0x0303);
        b.bytes(&rng.bytes(32));
        b.len8(|b| b.bytes(session_id));
        b.u16(cipher);
        b.u8(0);
        b.len16(|b| {
            if v13 {
                b.ext(43, |b| b.u16(0x0304));
                let key = rng.bytes(32);
                b.ext(51, |b| {
                    b.u16(0x001d);
                    b.len16(|b| b.bytes(&key));
                });
                if psk {
                    b.ext(41, |b| b.u16(0));
                }
            } else {
                b.ext(0xff01, |b| b.u8(0));
                b.ext(23, |_| {});
                b.ext(11, |b| b.len8(|b| b.u8(0)));
                if let Some(p) = alpn {
                    b.ext(16, |b| b.len16(|b| b.len8(|b| b.bytes(p.as_bytes()))));
                }
            }
        })
    })
}

/// A DER element: tag, definite length, contents.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let n = content.len();
    let mut v = Vec::with_capacity(n + 4);
    v.push(tag);
    match n {
        0..=127 => v.push(n as u8),
        128..=255 => v.extend_from_slice(&[0x81, n as u8]),
        _ => v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
    }
    v.extend_from_slice(content);
    v
}

fn der_seq(parts: &[Vec<u8>]) -> Vec<u8> {
    der(0x30, &parts.concat())
}

/// An X.501 name: C, O and CN.
fn der_name(cn: &str, org: &str) -> Vec<u8> {
    let rdn = |oid: &[u8], tag: u8, value: &str| {
        der(
            0x31,
            &der_seq(&[der(0x06, oid), der(tag, value.as_bytes())]),
        )
    };
    der_seq(&[
        rdn(&[0x55, 4, 6], 0x13, "US"),
        rdn(&[0x55, 4, 10], 0x0c, org),
        rdn(&[0x55, 4, 3], 0x0c, cn),
    ])
}

/// A structurally valid X.509 v3 certificate signed with
/// sha256WithRSAEncryption (random bits). A CA certificate carries an RSA
/// 4096 key; a server certificate an ECDSA P-256 key and a subjectAltName
/// listing `subject` and as many other names as bring it to about `size`
/// bytes (as CDN certificates do).
fn x509(rng: &mut Rng, subject: &str, issuer: &str, ca: bool, size: usize) -> Vec<u8> {
    const SHA256_RSA: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 11];
    const RSA: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 1];
    const EC_PUBLIC_KEY: [u8; 7] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1];
    const PRIME256V1: [u8; 8] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 3, 1, 7];
    let alg = der_seq(&[der(0x06, &SHA256_RSA), der(0x05, &[])]);
    let mut serial = rng.bytes(16);
    serial[0] &= 0x7f;
    let spki = if ca {
        let mut modulus = vec![0];
        modulus.extend_from_slice(&rng.bytes(512));
        modulus[1] |= 0x80;
        let key = der_seq(&[der(0x02, &modulus), der(0x02, &[1, 0, 1])]);
        let mut bits = vec![0];
        bits.extend_from_slice(&key);
        der_seq(&[
            der_seq(&[der(0x06, &RSA), der(0x05, &[])]),
            der(0x03, &bits),
        ])
    } else {
        let mut point = vec![0, 4];
        point.extend_from_slice(&rng.bytes(64));
        der_seq(&[
            der_seq(&[der(0x06, &EC_PUBLIC_KEY), der(0x06, &PRIME256V1)]),
            der(0x03, &point),
        ])
    };
    let validity = der_seq(&[der(0x17, b"231101000000Z"), der(0x17, b"240201000000Z")]);
    let basic = if ca {
        der_seq(&[der(0x01, &[0xff]), der(0x02, &[0])])
    } else {
        der_seq(&[])
    };
    let mut exts = vec![der_seq(&[
        der(0x06, &[0x55, 0x1d, 0x13]),
        der(0x01, &[0xff]),
        der(0x04, &basic),
    ])];
    let key_id = rng.bytes(20);
    exts.push(der_seq(&[
        der(0x06, &[0x55, 0x1d, 0x0e]),
        der(0x04, &der(0x04, &key_id)),
    ]));
    if !ca {
        let mut names = vec![der(0x82, subject.as_bytes())];
        let mut len = 460 + subject.len();
        while len < size {
            let name = format!("s{}.{subject}", rng.below(100_000));
            len += name.len() + 2;
            names.push(der(0x82, name.as_bytes()));
        }
        let san = der_seq(&names);
        exts.push(der_seq(&[der(0x06, &[0x55, 0x1d, 0x11]), der(0x04, &san)]));
    }
    let tbs = der_seq(&[
        der(0xa0, &der(0x02, &[2])),
        der(0x02, &serial),
        alg.clone(),
        der_name(issuer, "Synthetic Trust Services"),
        validity,
        der_name(subject, "Synthetic Example Inc"),
        spki,
        der(0xa3, &der_seq(&exts)),
    ]);
    let mut signature = vec![0];
    signature.extend_from_slice(&rng.bytes(if ca { 512 } else { 256 }));
    der_seq(&[tbs, alg, der(0x03, &signature)])
}

/// A certificate chain of about 3 KB: the server's certificate and an
/// intermediate CA's.
pub(crate) fn certificate(rng: &mut Rng, sni: &str) -> Vec<u8> {
    let leaf_size = rng.range(1000, 2000) as usize;
    let leaf = x509(rng, sni, "Synthetic Issuing CA 1", false, leaf_size);
    let ca = x509(rng, "Synthetic Issuing CA 1", "Synthetic Root CA", true, 0);
    handshake(11, |b| {
        b.len24(|b| {
            for cert in [&leaf, &ca] {
                b.len24(|b| b.bytes(cert));
            }
        })
    })
}

pub(crate) fn server_key_exchange(rng: &mut Rng) -> Vec<u8> {
    let (key, sig) = (rng.bytes(32), rng.bytes(256));
    handshake(12, |b| {
        b.u8(3);
        b.u16(0x001d);
        b.len8(|b| b.bytes(&key));
        b.u16(0x0804);
        b.len16(|b| b.bytes(&sig));
    })
}

pub(crate) fn client_key_exchange(rng: &mut Rng) -> Vec<u8> {
    let key = rng.bytes(32);
    handshake(16, |b| b.len8(|b| b.bytes(&key)))
}

pub(crate) fn change_cipher_spec() -> Vec<u8> {
    record(20, 0x0303, &[1])
}

/// An encrypted TLS 1.2 Finished (AES-GCM: nonce, 16 bytes, tag).
pub(crate) fn finished_12(rng: &mut Rng) -> Vec<u8> {
    record(22, 0x0303, &rng.bytes(40))
}
