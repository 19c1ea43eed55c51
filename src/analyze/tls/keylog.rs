//! A key log in the NSS format that browsers, curl, OpenSSL, Java agents and
//! Go write when `SSLKEYLOGFILE` is set (tshark's `tls.keylog_file`): the
//! secrets of each TLS session, keyed by its ClientHello random.
//!
//! Reads and looks up secrets; does not derive keys or open records
//! (`decrypt` does). A live capture follows the file as the client appends
//! to it; an analysis of a saved capture reads it once.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;

use crate::error::KeyLogError;

/// The secrets logged for one ClientHello random. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// TLS ≤ 1.2: the master secret (`CLIENT_RANDOM`).
    pub master: Option<Box<[u8]>>,
    /// TLS 1.3: `CLIENT_EARLY_TRAFFIC_SECRET` (0-RTT data).
    pub client_early: Option<Box<[u8]>>,
    /// TLS 1.3: `CLIENT_HANDSHAKE_TRAFFIC_SECRET`.
    pub client_handshake: Option<Box<[u8]>>,
    /// TLS 1.3: `SERVER_HANDSHAKE_TRAFFIC_SECRET`.
    pub server_handshake: Option<Box<[u8]>>,
    /// TLS 1.3: `CLIENT_TRAFFIC_SECRET_0`.
    pub client_traffic: Option<Box<[u8]>>,
    /// TLS 1.3: `SERVER_TRAFFIC_SECRET_0`.
    pub server_traffic: Option<Box<[u8]>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets")
    }
}

/// Lines in the key logs, as read so far.
#[derive(Default)]
struct Table {
    secrets: HashMap<[u8; 32], Secrets>,
    /// Bytes of each file read (a following log reads on from there).
    read: Vec<u64>,
    /// Lines with a label this tool uses whose values are not hex of the
    /// right length.
    malformed: u64,
}

/// Key logs: secrets by ClientHello random, from one file or several (a
/// comparison of two captures, each with its client's log).
pub struct KeyLog {
    paths: Vec<PathBuf>,
    /// Read the file again when a random is not found (live capture).
    follow: bool,
    table: Mutex<Table>,
}

impl std::fmt::Debug for KeyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLog")
            .field("paths", &self.paths)
            .field("follow", &self.follow)
            .finish_non_exhaustive()
    }
}

/// Longest line kept: a label and two hex values of 32 and 48 bytes fit
/// in 200; longer lines are not key log lines.
const MAX_LINE: usize = 1024;

impl KeyLog {
    /// Reads the key logs at `paths`. A saved capture's logs (`follow`
    /// false) must each hold at least one secret; a live capture's may
    /// still be empty, and are read on from where they ended whenever a
    /// ClientHello's random is not in them yet.
    pub fn open(paths: &[PathBuf], follow: bool) -> Result<KeyLog, KeyLogError> {
        let log = KeyLog {
            paths: paths.to_vec(),
            follow,
            table: Mutex::new(Table {
                read: vec![0; paths.len()],
                ..Table::default()
            }),
        };
        let mut table = log.lock();
        for (k, path) in paths.iter().enumerate() {
            let before = table.secrets.len();
            log.read_on(k, &mut table)?;
            if table.secrets.len() == before && !follow {
                return Err(KeyLogError::NoSecrets { path: path.clone() });
            }
        }
        drop(table);
        Ok(log)
    }

    /// A key log from text.
    pub fn from_text(text: &str) -> KeyLog {
        KeyLog::with_texts(None, &[text.to_string()])
    }

    /// `base`'s secrets (if any) and those in `texts` (key logs embedded in
    /// a capture), read once.
    pub fn with_texts(base: Option<&KeyLog>, texts: &[String]) -> KeyLog {
        let mut table = Table::default();
        if let Some(base) = base {
            table.secrets = base.lock().secrets.clone();
        }
        for text in texts {
            parse(text.as_bytes(), &mut table);
        }
        KeyLog {
            paths: Vec::new(),
            follow: false,
            table: Mutex::new(table),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic elsewhere while holding the lock leaves a table that is
        // still whole: every insert is one map operation.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads file `k` from where the last read ended.
    fn read_on(&self, k: usize, table: &mut Table) -> Result<(), KeyLogError> {
        let (Some(path), Some(&read)) = (self.paths.get(k), table.read.get(k)) else {
            return Ok(());
        };
        let err = |source| KeyLogError::Read {
            path: path.clone(),
            source,
        };
        let mut file = match File::open(path) {
            Ok(file) => file,
            // A live capture may start before the client creates its log.
            Err(e) if self.follow && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(KeyLogError::Open {
                    path: path.clone(),
                    source,
                })
            }
        };
        file.seek(SeekFrom::Start(read)).map_err(err)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(err)?;
        // Only whole lines: the writer may be in the middle of one.
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let whole = if self.follow { whole } else { bytes.len() };
        parse(bytes.get(..whole).unwrap_or_default(), table);
        if let Some(read) = table.read.get_mut(k) {
            *read += whole as u64;
        }
        Ok(())
    }

    /// Whether the files are read on as they grow (a live capture).
    pub fn follows(&self) -> bool {
        self.follow
    }

    /// The secrets logged for a ClientHello random, if any. A followed log
    /// first reads what was appended to its files since (a session's
    /// lines come one by one as its handshake runs).
    pub fn get(&self, client_random: &[u8; 32]) -> Option<Secrets> {
        let mut table = self.lock();
        if self.follow {
            for (k, path) in self.paths.iter().enumerate() {
                // Only a file that grew is read (one `stat` otherwise). A
                // file that went away or cannot be read keeps what was read.
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                if table.read.get(k).is_some_and(|&read| len > read) {
                    let _ = self.read_on(k, &mut table);
                }
            }
        }
        table.secrets.get(client_random).cloned()
    }

    /// Sessions with at least one secret.
    pub fn sessions(&self) -> usize {
        self.lock().secrets.len()
    }

    /// Lines that carried a known label with values that are not hex of
    /// the right length.
    pub fn malformed(&self) -> u64 {
        self.lock().malformed
    }
}

/// Adds the lines in `text` to `table`. Comments, blank lines and labels
/// this tool does not use (`EXPORTER_SECRET`, `RSA`) are skipped, as
/// Wireshark skips them.
fn parse(text: &[u8], table: &mut Table) {
    let mut reader = BufReader::new(text);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() >= MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of an overlong line.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                break;
            }
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let mut words = text.split_ascii_whitespace();
        let (Some(label), Some(random), Some(secret)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let lengths: &[usize] = match label {
            "CLIENT_RANDOM" => &[48],
            "CLIENT_EARLY_TRAFFIC_SECRET"
            | "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
            | "SERVER_HANDSHAKE_TRAFFIC_SECRET"
            | "CLIENT_TRAFFIC_SECRET_0"
            | "SERVER_TRAFFIC_SECRET_0" => &[32, 48],
            _ => continue,
        };
        let random = unhex(random).and_then(|r| <[u8; 32]>::try_from(r).ok());
        let secret = unhex(secret).filter(|s| lengths.contains(&s.len()));
        let (Some(random), Some(secret)) = (random, secret) else {
            table.malformed += 1;
            continue;
        };
        let entry = table.secrets.entry(random).or_default();
        let slot = match label {
            "CLIENT_RANDOM" => &mut entry.master,
            "CLIENT_EARLY_TRAFFIC_SECRET" => &mut entry.client_early,
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => &mut entry.client_handshake,
            "SERVER_HANDSHAKE_TRAFFIC_SECRET" => &mut entry.server_handshake,
            "CLIENT_TRAFFIC_SECRET_0" => &mut entry.client_traffic,
            _ => &mut entry.server_traffic,
        };
        *slot = Some(secret.into_boxed_slice());
    }
}

/// Lower- or upper-case hex; `None` if it is not hex of whole bytes.
fn unhex(s: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let pairs = s.as_bytes().chunks(2);
    pairs
        .map(|p| match p {
            [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const R1: &str = "72cfe4063b10cbc1c882e797a829a0b843b63119d9c25eafcc5c2901a76b13a8";

    fn random(s: &str) -> [u8; 32] {
        unhex(s).unwrap().try_into().unwrap()
    }

    #[test]
    fn reads_tls12_and_tls13_lines_and_skips_the_rest() {
        let secret32 = "ab".repeat(32);
        let secret48 = "CD".repeat(48);
        let text = format!(
            "# comment\n\nCLIENT_HANDSHAKE_TRAFFIC_SECRET {R1} {secret32}\n\
             EXPORTER_SECRET {R1} {secret32}\r\n\
             SERVER_TRAFFIC_SECRET_0 {R1} {secret48}\n\
             CLIENT_RANDOM {} {secret48}\n\
             CLIENT_RANDOM {} {secret32}\n\
             CLIENT_TRAFFIC_SECRET_0 zz{} {secret32}\n\
             RSA 0102030405060708 {secret48}\n\
             CLIENT_RANDOM only-two-words\n",
            "11".repeat(32),
            "22".repeat(32),
            &R1[2..],
        );
        let log = KeyLog::from_text(&text);
        assert_eq!(log.sessions(), 2);
        // A 32-byte master secret and a random that is not hex.
        assert_eq!(log.malformed(), 2);
        let s = log.get(&random(R1)).unwrap();
        assert_eq!(s.client_handshake.as_deref(), Some(&[0xab; 32][..]));
        assert_eq!(s.server_traffic.as_deref(), Some(&[0xcd; 48][..]));
        assert!(s.master.is_none() && s.client_traffic.is_none());
        let s = log.get(&[0x11; 32]).unwrap();
        assert_eq!(s.master.as_deref(), Some(&[0xcd; 48][..]));
        assert!(log.get(&[0x22; 32]).is_none());
        // Secrets are never printed.
        assert_eq!(format!("{s:?}"), "Secrets");
    }

    #[test]
    fn an_overlong_line_is_skipped_and_the_next_is_read() {
        let text = format!(
            "{}\nCLIENT_RANDOM {} {}\n",
            "x".repeat(5000),
            "11".repeat(32),
            "cd".repeat(48)
        );
        assert_eq!(KeyLog::from_text(&text).sessions(), 1);
    }

    #[test]
    fn files_are_named_in_errors_and_followed_when_live() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.log");
        let paths = [path.clone()];
        let err = KeyLog::open(&paths, false).unwrap_err().to_string();
        assert!(err.starts_with(&path.display().to_string()), "{err}");
        std::fs::write(&path, "# nothing yet\n").unwrap();
        let err = KeyLog::open(&paths, false).unwrap_err().to_string();
        assert!(err.contains("no TLS secrets"), "{err}");
        // Several logs: each must hold secrets, and the error names the one
        // that does not.
        let other = dir.path().join("other.log");
        std::fs::write(
            &other,
            format!("CLIENT_RANDOM {} {}\n", "33".repeat(32), "cd".repeat(48)),
        )
        .unwrap();
        let err = KeyLog::open(&[other.clone(), path.clone()], false)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&path.display().to_string()), "{err}");
        // Live: an empty log is fine, and so is one not created yet; lines
        // appended later are found, but not a line still being written.
        let later = dir.path().join("later.log");
        let log = KeyLog::open(&[other, path.clone(), later.clone()], true).unwrap();
        assert!(log.get(&[0x33; 32]).is_some());
        assert!(log.get(&[0x44; 32]).is_none());
        std::fs::write(
            &later,
            format!("CLIENT_RANDOM {} {}\n", "44".repeat(32), "cd".repeat(48)),
        )
        .unwrap();
        assert!(log.get(&[0x44; 32]).is_some());
        let line = format!("CLIENT_RANDOM {} {}", "11".repeat(32), "cd".repeat(48));
        std::fs::write(&path, format!("# nothing yet\n{line}")).unwrap();
        assert!(log.get(&[0x11; 32]).is_none());
        std::fs::write(&path, format!("# nothing yet\n{line}\n")).unwrap();
        assert!(log.get(&[0x11; 32]).is_some());
    }
}
