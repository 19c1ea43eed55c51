//! The command line: `--out`, `--size`, `--connections`, `--mix`, `--seed`,
//! `--concurrency`, `--quiet`.
//!
//! Owns: [`Args`], [`parse_args`] (and [`parse`], its testable core), size
//! parsing and the usage line.
//! Does not own: opening the output or reporting errors (`main.rs`), or what
//! a mix means (`mix.rs`).

use crate::mix::Mix;

pub(crate) const USAGE: &str = "usage: handshakes-synth --out FILE|- [--size 1GiB] [--connections N] [--mix web|short] [--seed N] [--concurrency N] [--quiet]
  --size         stop opening connections near this many bytes (default 1GiB,
                 or no limit when --connections is given)
  --connections  open exactly this many connections, then stop
  --mix          web: browsers and keep-alive clients, 1-50 requests per
                 connection (default); short: clients without pooling against
                 a rate-limited API, 1-2 small requests per connection
  --concurrency  connections open at once (default 300)";

/// The size target when neither `--size` nor `--connections` is given.
const DEFAULT_SIZE: u64 = 1 << 30;

/// `1GiB`, `50MB`, `20MiB`, `1000000`, `512k`.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return None,
    };
    Some((num * mult as f64) as u64)
}

/// A count: `1000000`, `1_000_000`, `300k`, `1M`.
fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1_000),
        (i, 'm' | 'M') => (&s[..i], 1_000_000),
        _ => (&s[..], 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

pub(crate) struct Args {
    pub(crate) out: String,
    /// Stop opening connections near this many bytes (`u64::MAX`: no limit).
    pub(crate) size: u64,
    /// Stop opening connections after this many (`u64::MAX`: no limit).
    pub(crate) connections: u64,
    pub(crate) mix: Mix,
    pub(crate) seed: u64,
    pub(crate) concurrency: usize,
    pub(crate) quiet: bool,
}

pub(crate) fn parse_args() -> Result<Args, String> {
    parse(std::env::args().skip(1))
}

/// Parses the arguments after the program name.
pub(crate) fn parse(argv: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        out: String::new(),
        size: DEFAULT_SIZE,
        connections: u64::MAX,
        mix: Mix::Web,
        seed: 1,
        concurrency: 300,
        quiet: false,
    };
    let mut size = None;
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--out" | "-o" => args.out = value()?,
            "--size" | "-s" => {
                let v = value()?;
                size = Some(parse_size(&v).ok_or_else(|| format!("bad size {v:?}"))?);
            }
            "--connections" | "-n" => {
                let v = value()?;
                args.connections = parse_count(&v)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad connection count {v:?}"))?;
            }
            "--mix" => {
                let v = value()?;
                args.mix = Mix::parse(&v).ok_or_else(|| format!("bad mix {v:?} (web, short)"))?;
            }
            "--seed" => {
                let v = value()?;
                args.seed = v.parse().map_err(|_| format!("bad seed {v:?}"))?;
            }
            "--concurrency" => {
                let v = value()?;
                args.concurrency = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad concurrency {v:?}"))?;
            }
            "--quiet" | "-q" => args.quiet = true,
            "--help" | "-h" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    if args.out.is_empty() {
        return Err("--out is required".into());
    }
    args.size = match (size, args.connections) {
        (Some(n), _) => n,
        (None, u64::MAX) => DEFAULT_SIZE,
        (None, _) => u64::MAX,
    };
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Args, String> {
        parse(line.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults_are_a_gibibyte_of_web_traffic() {
        let a = args("--out x.pcap").unwrap();
        assert_eq!(a.size, 1 << 30);
        assert_eq!(a.connections, u64::MAX);
        assert_eq!(a.mix, Mix::Web);
        assert_eq!(a.concurrency, 300);
        assert_eq!(a.seed, 1);
    }

    #[test]
    fn connections_alone_lift_the_size_limit() {
        let a = args("--out x --connections 1M --mix short").unwrap();
        assert_eq!(a.connections, 1_000_000);
        assert_eq!(a.size, u64::MAX);
        assert_eq!(a.mix, Mix::Short);
        let a = args("--out x --connections=300k --size 50MiB").unwrap();
        assert_eq!(a.connections, 300_000);
        assert_eq!(a.size, 50 << 20);
        let a = args("--out x -n 1_000").unwrap();
        assert_eq!(a.connections, 1000);
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(args("--out x --connections 0").is_err());
        assert!(args("--out x --connections lots").is_err());
        assert!(args("--out x --mix bulk").is_err());
        assert!(args("--out x --concurrency 0").is_err());
        assert!(args("--connections 5").is_err());
    }

    #[test]
    fn sizes_and_counts_parse() {
        assert_eq!(parse_size("50MiB"), Some(50 << 20));
        assert_eq!(parse_size("1.5k"), Some(1500));
        assert_eq!(parse_size("9 parsecs"), None);
        assert_eq!(parse_count("100000"), Some(100_000));
        assert_eq!(parse_count("2k"), Some(2000));
        assert_eq!(parse_count("k"), None);
    }
}
