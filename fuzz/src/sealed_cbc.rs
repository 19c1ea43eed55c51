//! The `tls_sealed` harness's CBC records: the AES-CBC suites of TLS 1.0,
//! 1.1 and 1.2 it chooses from, their key block from a master secret, and
//! records sealed as a peer sends them — MAC-then-encrypt or
//! encrypt-then-MAC, each record's IV sent before it or (TLS 1.0) chained
//! from the last. Restated here from the RFCs rather than taken from the
//! analyzer, so that the fuzzing checks the analyzer instead of echoing it;
//! only the primitives (`crypto`) are shared.

use handshakes::analyze::tls::crypto::{prf10, prf12, Block, Hash, Mac, BLOCK};

/// A CBC suite: id, version, AES key length, MAC, TLS 1.2's PRF hash,
/// encrypt-then-MAC.
pub type CbcSuite = (u16, u16, usize, Hash, Hash, bool);

/// The CBC suites the input chooses from.
pub const CBC_SUITES: [CbcSuite; 6] = [
    (0xc013, 0x0303, 16, Hash::Sha1, Hash::Sha256, true),
    (0xc028, 0x0303, 32, Hash::Sha384, Hash::Sha384, false),
    (0x003c, 0x0303, 16, Hash::Sha256, Hash::Sha256, false),
    (0xc014, 0x0302, 32, Hash::Sha1, Hash::Sha256, true),
    (0xc013, 0x0301, 16, Hash::Sha1, Hash::Sha256, false),
    (0x0035, 0x0301, 32, Hash::Sha1, Hash::Sha256, true),
];

/// One direction's CBC sealing state.
pub struct CbcSealer {
    block: Block,
    mac: Mac,
    /// TLS 1.0: the next record's IV; TLS 1.1 and 1.2: the next one sent.
    iv: [u8; BLOCK],
    chained: bool,
    etm: bool,
    seq: u64,
}

/// Both directions' sealers from `master` and the two randoms (RFC 5246
/// §6.3: MAC keys, write keys, IVs, the client's before the server's).
pub fn cbc_sealers(
    suite: CbcSuite,
    master: &[u8],
    server_random: &[u8],
    client_random: &[u8],
) -> Option<[CbcSealer; 2]> {
    let (_, version, key_len, mac, prf, etm) = suite;
    let mac_len = mac.output_len();
    let seed = [server_random, client_random].concat();
    let len = 2 * (mac_len + key_len + BLOCK);
    let block = if version == 0x0303 {
        prf12(prf, master, b"key expansion", &seed, len)?
    } else {
        prf10(master, b"key expansion", &seed, len)?
    };
    let part = |at: usize, n: usize| block.get(at..at + n);
    let sealer = |k: usize| -> Option<CbcSealer> {
        let mac_key = part(k * mac_len, mac_len)?;
        let key = part(2 * mac_len + k * key_len, key_len)?;
        let iv = part(2 * (mac_len + key_len) + k * BLOCK, BLOCK)?;
        Some(CbcSealer {
            block: Block::new(key)?,
            mac: Mac::new(mac, mac_key)?,
            iv: iv.try_into().ok()?,
            chained: version == 0x0301,
            etm,
            seq: 0,
        })
    };
    Some([sealer(0)?, sealer(1)?])
}

impl CbcSealer {
    /// `text` sealed as the next record of type `ty` (sent with record
    /// version 3,3, which its MAC covers): the record's body.
    pub fn seal(&mut self, ty: u8, text: &[u8]) -> Option<Vec<u8>> {
        let seq = self.seq;
        self.seq += 1;
        let header = |len: usize| -> Option<Vec<u8>> {
            let len = u16::try_from(len).ok()?.to_be_bytes();
            Some([&seq.to_be_bytes()[..], &[ty, 3, 3], &len].concat())
        };
        let mut data = text.to_vec();
        if !self.etm {
            data.extend(self.mac.tag(&[&header(text.len())?, text]));
        }
        // Padding: `pad` bytes, then their count, each of value `pad`;
        // more than the least, now and then, as real stacks may send.
        let pad = BLOCK - 1 - data.len() % BLOCK + usize::from(seq % 3 == 2) * BLOCK;
        data.extend(std::iter::repeat_n(u8::try_from(pad).ok()?, pad + 1));
        self.block.encrypt(&self.iv, &mut data)?;
        let mut body = Vec::with_capacity(BLOCK + data.len() + 48);
        if self.chained {
            let last = data.len().checked_sub(BLOCK)?;
            self.iv.copy_from_slice(data.get(last..)?);
        } else {
            body.extend_from_slice(&self.iv);
            // The next explicit IV: unpredictable enough for a harness.
            self.iv = self.iv.map(|b| b.wrapping_mul(31).wrapping_add(7));
        }
        body.extend(data);
        if self.etm {
            let tag = self.mac.tag(&[&header(body.len())?, &body]);
            body.extend(tag);
        }
        Some(body)
    }
}
