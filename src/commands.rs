//! The `compare` and `timeline` subcommands and the `--html` report of
//! `analyze`: read captures through the library, hand the results to the
//! reports, and map failures to exit codes.
//!
//! Does not analyze or format anything itself.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use handshakes::report::compare::{self, CompareOpts, Labeled};
use handshakes::report::html;
use handshakes::report::timeline::{self, TimelineOpts};
use handshakes::source::file::{Access, FileSource};
use handshakes::{analyze, Config, ConnectionRecord, Error, RecordSink, Summary};

use crate::cli::{self, CompareArgs, CompareFormat, TimelineArgs};

const EXIT_OUTPUT: u8 = 1;
const EXIT_INPUT: u8 = 2;

/// Colour only for a terminal, and never with NO_COLOR set.
pub fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Inputs smaller than this finish too fast to need a progress display.
const PROGRESS_FROM: u64 = 100 << 20;

/// A progress bar on stderr for large inputs, only when stderr is a terminal.
pub struct Progress {
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled: enabled && io::stderr().is_terminal(),
            bar: None,
        }
    }

    pub fn update(&mut self, read: u64, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let bar = match (&self.bar, total) {
            (Some(bar), _) => bar,
            (None, Some(total)) if total >= PROGRESS_FROM => {
                let bar = indicatif::ProgressBar::new(total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                ) {
                    bar.set_style(style);
                }
                self.bar.insert(bar)
            }
            _ => return,
        };
        bar.set_position(read);
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// One analysed capture.
pub struct Analysed {
    pub summary: Summary,
    pub records: Vec<ConnectionRecord>,
}

/// Drops every record: the summary has folded in what it reads of each
/// before a sink sees it.
struct Discard;

impl RecordSink for Discard {
    fn record(&mut self, _: ConnectionRecord) -> io::Result<()> {
        Ok(())
    }
}

/// Runs the whole pipeline on one file; keeps its records (in id order)
/// only if `keep`, so that a summary of any capture takes bounded memory.
pub fn analyse(
    path: &Path,
    config: &Config,
    access: Access,
    keep: bool,
) -> Result<Analysed, Error> {
    let mut source = FileSource::open_with(path, access)?;
    let mut records = Vec::new();
    let summary = if keep {
        analyze(&mut source, config, &mut records)?
    } else {
        analyze(&mut source, config, &mut Discard)?
    };
    records.sort_by_key(|r| r.id);
    Ok(Analysed { summary, records })
}

/// Writes an HTML report of `docs` to `path`.
pub fn write_html(path: &Path, docs: &[Labeled]) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    html::write(docs, &mut out)?;
    out.flush()
}

fn fail(e: Error) -> ExitCode {
    match e {
        Error::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Error::Output(e) => {
            eprintln!("handshakes: writing output: {e}");
            ExitCode::from(EXIT_OUTPUT)
        }
        Error::Source(e) => {
            eprintln!("handshakes: {e}");
            ExitCode::from(EXIT_INPUT)
        }
    }
}

pub fn run_compare(args: &CompareArgs) -> ExitCode {
    let config = match decode_config(&args.decode) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let access = cli::access(args.no_mmap, 1);
    let (a, b) = match (
        // The comparison reads only the summaries; the HTML report draws
        // every connection.
        analyse(&args.a, &config, access, args.html.is_some()),
        analyse(&args.b, &config, access, args.html.is_some()),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return fail(e),
    };
    for w in a.summary.warnings.iter().chain(&b.summary.warnings) {
        eprintln!("handshakes: warning: {w}");
    }
    let la = Labeled {
        label: args.label('A'),
        summary: &a.summary,
        records: &a.records,
    };
    let lb = Labeled {
        label: args.label('B'),
        summary: &b.summary,
        records: &b.records,
    };
    if let Some(path) = &args.html {
        if let Err(e) = write_html(path, &[la.clone(), lb.clone()]) {
            eprintln!(
                "handshakes: {}: cannot write the HTML report: {e}",
                path.display()
            );
            return ExitCode::from(EXIT_OUTPUT);
        }
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let written = match args.format {
        CompareFormat::Table => {
            compare::write(&la, &lb, &mut out, &CompareOpts { color: use_color() })
        }
        CompareFormat::Json => compare::write_json(&la, &lb, &mut out),
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(Error::Output(e)),
    }
}

/// The default analysis with `-d`'s tunnel ports; a bad `-d` is reported.
fn decode_config(decode: &cli::DecodeArgs) -> Result<Config, ExitCode> {
    match decode.udp_tunnels() {
        Ok(udp_tunnels) => Ok(Config {
            udp_tunnels,
            ..Config::default()
        }),
        Err(msg) => {
            eprintln!("handshakes: {msg}");
            Err(ExitCode::from(EXIT_INPUT))
        }
    }
}

pub fn run_timeline(args: &TimelineArgs) -> ExitCode {
    let config = match decode_config(&args.decode) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let doc = match analyse(&args.file, &config, cli::access(args.no_mmap, 1), true) {
        Ok(doc) => doc,
        Err(e) => return fail(e),
    };
    let width = args.width.unwrap_or_else(|| {
        terminal_size::terminal_size()
            .map(|(w, _)| usize::from(w.0))
            .filter(|_| io::stdout().is_terminal())
            .unwrap_or(100)
    });
    let opts = TimelineOpts {
        width,
        color: use_color(),
        conn: args.conn,
        top: args.top,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    match timeline::write(&doc.records, &doc.summary, &mut out, &opts).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(Error::Output(e)),
    }
}
