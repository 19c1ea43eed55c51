//! The `compare` and `timeline` subcommands and the `--html` report of
//! `analyze`: read captures through the library, hand the results to the
//! reports, and map failures to exit codes.
//!
//! Does not analyze or format anything itself.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use handshakes::report::compare::{self, CompareOpts, Labeled};
use handshakes::report::drawn::{Drawn, DrawnSink};
use handshakes::report::html;
use handshakes::report::timeline::{self, Rows, TimelineOpts};
use handshakes::source::file::{Access, FileSource};
use handshakes::{
    analyze_with_progress, Config, ConnectionRecord, Error, KeyLog, RecordSink, Summary,
};

use crate::cli::{self, CompareArgs, CompareFormat, TimelineArgs};
use crate::status;

const EXIT_OUTPUT: u8 = 1;
const EXIT_INPUT: u8 = 2;

/// Colour only for a terminal, and never with NO_COLOR set.
pub fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Runs the whole pipeline on one file, its records going to `sink`, the
/// progress on standard error (as `name`, unless `quiet`).
fn analyse_into(
    path: &Path,
    config: &Config,
    (access, quiet): (Access, bool),
    name: &str,
    sink: &mut dyn RecordSink,
) -> Result<Summary, Error> {
    let mut source = FileSource::open_with(path, access)?;
    let config = config.with_secrets(source.secrets_at_head());
    let mut bar = status::Progress::new(name, quiet);
    let summary = analyze_with_progress(&mut source, &config, sink, &mut |r| bar.update(r));
    bar.finish();
    summary
}

/// Drops every record: the summary has folded in what it reads of each
/// before a sink sees it.
struct Discard;

impl RecordSink for Discard {
    fn record(&mut self, _: ConnectionRecord) -> io::Result<()> {
        Ok(())
    }
}

/// One capture's summary and, if `draw`, what the HTML report draws of it
/// (empty otherwise): never every record.
fn summarise(
    path: &Path,
    config: &Config,
    reading: (Access, bool),
    name: &str,
    draw: bool,
) -> Result<(Summary, Drawn), Error> {
    if draw {
        let mut drawn = DrawnSink::new();
        let summary = analyse_into(path, config, reading, name, &mut drawn)?;
        Ok((summary, drawn.finish()))
    } else {
        let summary = analyse_into(path, config, reading, name, &mut Discard)?;
        Ok((summary, Drawn::default()))
    }
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
    if let Some(problem) = args.problem() {
        eprintln!("handshakes: {problem}");
        return ExitCode::from(EXIT_INPUT);
    }
    let config = match decode_config(&args.decode, &args.tls, &args.select) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let reading = (cli::access(args.no_mmap, 1), args.progress.quiet);
    // The comparison reads only the summaries.
    let draw = args.html.is_some();
    let mut read = Vec::with_capacity(args.files.len());
    for (i, path) in args.files.iter().enumerate() {
        match summarise(path, &config, reading, &args.label(i), draw) {
            Ok(r) => read.push(r),
            Err(e) => return fail(e),
        }
    }
    for w in read.iter().flat_map(|r| &r.0.warnings) {
        eprintln!("handshakes: warning: {w}");
    }
    let docs: Vec<Labeled> = read
        .iter()
        .enumerate()
        .map(|(i, (summary, drawn))| Labeled {
            label: args.label(i),
            summary,
            drawn: Cow::Borrowed(drawn),
        })
        .collect();
    if let Some(path) = &args.html {
        if let Err(e) = write_html(path, &docs) {
            eprintln!(
                "handshakes: {}: cannot write the HTML report: {e}",
                path.display()
            );
            return ExitCode::from(EXIT_OUTPUT);
        }
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let opts = CompareOpts { color: use_color() };
    let written = match (&docs[..], args.format) {
        ([a, b], CompareFormat::Table) => compare::write(a, b, &mut out, &opts),
        ([a, b], CompareFormat::Json) => compare::write_json(a, b, &mut out),
        (_, CompareFormat::Table) => compare::many::write(&docs, &mut out, &opts),
        (_, CompareFormat::Json) => compare::many::write_json(&docs, &mut out),
        ([a, b], CompareFormat::Markdown) => compare::write_markdown(a, b, &mut out),
        (_, CompareFormat::Markdown) => compare::many::write_markdown(&docs, &mut out),
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(Error::Output(e)),
    }
}

/// The default analysis with `-d`'s tunnel ports, `--keylog`'s secrets
/// and the connections `--port`, `--host`, `--overlay` and `-f` keep; a
/// bad `-d`, `-f` or key log is reported.
fn decode_config(
    decode: &cli::DecodeArgs,
    tls: &cli::TlsArgs,
    select: &cli::SelectArgs,
) -> Result<Config, ExitCode> {
    let checked = decode.udp_tunnels().and_then(|udp_tunnels| {
        select.validate()?;
        Ok(udp_tunnels)
    });
    let udp_tunnels = match checked {
        Ok(udp_tunnels) => udp_tunnels,
        Err(msg) => {
            eprintln!("handshakes: {msg}");
            return Err(ExitCode::from(EXIT_INPUT));
        }
    };
    let keylog = load_keylog(tls, false)?;
    Ok(select.apply(Config {
        udp_tunnels,
        keylog,
        ..Config::default()
    }))
}

/// `--keylog`'s files, read (`follow`: and followed, for a live capture);
/// a file that cannot be used is reported.
pub fn load_keylog(tls: &cli::TlsArgs, follow: bool) -> Result<Option<Arc<KeyLog>>, ExitCode> {
    if tls.keylog.is_empty() {
        return Ok(None);
    }
    match KeyLog::open(&tls.keylog, follow) {
        Ok(log) => {
            let bad = log.malformed();
            if bad > 0 {
                eprintln!(
                    "handshakes: warning: --keylog: {bad} line(s) with a known label but not a 64-digit client random and a secret of the right length were skipped"
                );
            }
            Ok(Some(Arc::new(log)))
        }
        Err(e) => {
            eprintln!("handshakes: {e}");
            Err(ExitCode::from(EXIT_INPUT))
        }
    }
}

pub fn run_timeline(args: &TimelineArgs) -> ExitCode {
    let config = match decode_config(&args.decode, &args.tls, &args.select) {
        Ok(config) => config,
        Err(code) => return code,
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
    // Rows, not records: every connection's, or only what --top or --conn shows.
    let mut rows = Rows::new(&opts);
    let reading = (cli::access(args.no_mmap, 1), args.progress.quiet);
    let name = args.file.display().to_string();
    let summary = match analyse_into(&args.file, &config, reading, &name, &mut rows) {
        Ok(summary) => summary,
        Err(e) => return fail(e),
    };
    let mut out = BufWriter::new(io::stdout().lock());
    match timeline::draw(rows, &summary, &mut out, &opts).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(Error::Output(e)),
    }
}
