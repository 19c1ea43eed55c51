//! The command line: `--out`, `--size`, `--seed`, `--concurrency`, `--quiet`.
//!
//! Owns: [`Args`], [`parse_args`], size parsing and the usage line.
//! Does not own: opening the output or reporting errors (`main.rs`).

pub(crate) const USAGE: &str =
    "usage: handshakes-synth --out FILE|- [--size 1GiB] [--seed N] [--concurrency N] [--quiet]";

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

pub(crate) struct Args {
    pub(crate) out: String,
    pub(crate) size: u64,
    pub(crate) seed: u64,
    pub(crate) concurrency: usize,
    pub(crate) quiet: bool,
}

pub(crate) fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: String::new(),
        size: 1 << 30,
        seed: 1,
        concurrency: 300,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
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
                args.size = parse_size(&v).ok_or_else(|| format!("bad size {v:?}"))?;
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
    Ok(args)
}
