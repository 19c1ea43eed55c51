//! The `handshakes` binary: parses arguments, runs the pipeline for each
//! input, writes reports to stdout and problems to stderr, and maps outcomes
//! to exit codes (0 ok, 1 output failure, 2 usage or unreadable input). A
//! closed stdout (`| head`) ends the run quietly.
//!
//! Does not analyze or format anything itself. Names the memory allocator:
//! mimalloc, measured against glibc's malloc on this tool's allocation
//! pattern (many small per-connection objects made on one thread and freed
//! soon after, or on another): 15–40 % less time on connection-heavy
//! captures, about 7 MiB more resident on small ones; built without
//! transparent huge pages, whose 2 MiB first-touch zeroing cost 16 MiB of
//! resident memory and a sixth of a one-thread profile (docs/performance.md).

mod cli;
mod commands;
mod live_cmd;
mod status;

use std::borrow::Cow;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use handshakes::analyze::Encoder;
use handshakes::record::QuicRecord;
use handshakes::report::compare::Labeled;
use handshakes::report::drawn::{Drawn, DrawnSink};
use handshakes::report::json::{DocumentSink, JsonlSink};
use handshakes::report::{csv::CsvReport, table::TableSink, Format, Opts};
use handshakes::source::file::FileSource;
use handshakes::source::merge::MergedSource;
use handshakes::{
    analyze_with_progress, Config, ConnectionRecord, Error, PacketSource, Reading, RecordSink,
    Summary,
};

use cli::{AnalyzeArgs, Cli, Command};

const EXIT_OUTPUT: u8 = 1;
const EXIT_INPUT: u8 = 2;
/// Bytes of output gathered before each write to standard output.
const OUT_BUFFER: usize = 64 << 10;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Analyze(args) => run_analyze(&args),
        Command::Live(args) => live_cmd::run_live(&args),
        Command::Interfaces => live_cmd::run_interfaces(),
        Command::Compare(args) => commands::run_compare(&args),
        Command::Timeline(args) => commands::run_timeline(&args),
    }
}

fn is_broken_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

fn run_analyze(args: &AnalyzeArgs) -> ExitCode {
    if let Err(msg) = args.validate() {
        eprintln!("handshakes: {msg}");
        return ExitCode::from(EXIT_INPUT);
    }
    let keylog = match commands::load_keylog(&args.tls, false) {
        Ok(keylog) => keylog,
        Err(code) => return code,
    };
    let stdout = io::stdout();
    let fit_terminal = stdout.is_terminal();
    // Records come in lines of 2–6 KB (JSON Lines): a larger buffer than
    // the default 8 KiB writes them in fewer, larger calls.
    let mut out = BufWriter::with_capacity(OUT_BUFFER, stdout.lock());
    let opts = Opts {
        limit: args.limit,
        fit_terminal,
        width: None,
    };
    let mut run = Run {
        args,
        config: Config {
            keylog,
            ..args.config()
        },
        opts,
        csv: CsvReport::new(),
        first: true,
        kept: Vec::new(),
    };
    let inputs = args.inputs();
    let mut failed = false;
    let groups: Vec<Vec<PathBuf>> = if args.merge {
        vec![inputs]
    } else {
        inputs.into_iter().map(|p| vec![p]).collect()
    };
    for group in groups {
        match run.one(&group, &mut out) {
            Ok(()) => {}
            Err(Error::Output(e)) if is_broken_pipe(&e) => return ExitCode::SUCCESS,
            Err(Error::Output(e)) => {
                eprintln!("handshakes: writing output: {e}");
                return ExitCode::from(EXIT_OUTPUT);
            }
            Err(Error::Source(e)) => {
                failed = true;
                eprintln!("handshakes: {e}");
            }
        }
    }
    if let Some(path) = &args.html {
        let docs: Vec<Labeled> = run
            .kept
            .iter()
            .map(|(summary, drawn)| Labeled {
                label: summary.file.clone(),
                summary,
                drawn: Cow::Borrowed(drawn),
            })
            .collect();
        if let Err(e) = commands::write_html(path, &docs) {
            eprintln!(
                "handshakes: {}: cannot write the HTML report: {e}",
                path.display()
            );
            return ExitCode::from(EXIT_OUTPUT);
        }
    }
    match out.flush() {
        Err(e) if !is_broken_pipe(&e) => {
            eprintln!("handshakes: writing output: {e}");
            ExitCode::from(EXIT_OUTPUT)
        }
        _ if failed => ExitCode::from(EXIT_INPUT),
        _ => ExitCode::SUCCESS,
    }
}

struct Run<'a> {
    args: &'a AnalyzeArgs,
    /// The analysis settings, made once for every input (`--keylog`'s
    /// secrets read, `-f` compiled).
    config: Config,
    opts: Opts,
    csv: CsvReport,
    first: bool,
    /// Every input's summary and what `--html` draws of it.
    kept: Vec<(Summary, Drawn)>,
}

/// Hands records to a report (JSON Lines, CSV rows, the table's first
/// rows, all of them) and shows each to `--html`'s [`DrawnSink`].
struct Tee<'a, S> {
    stream: S,
    keep: Option<&'a mut DrawnSink>,
}

impl<S: RecordSink> RecordSink for Tee<'_, S> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        if let Some(keep) = self.keep.as_mut() {
            keep.note(&rec);
        }
        self.stream.record(rec)
    }

    /// Records come encoded only when none is drawn.
    fn encoder(&self) -> Option<Encoder> {
        self.keep.is_none().then(|| self.stream.encoder()).flatten()
    }

    fn record_encoded(&mut self, id: u64, encoded: &[u8]) -> io::Result<()> {
        self.stream.record_encoded(id, encoded)
    }

    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        self.stream.quic(rec)
    }
}

/// Runs `source` through the analysis into a report's `stream`, showing
/// every record to `drawn` (`--html`'s); gives the stream back.
fn through<S: RecordSink>(
    source: &mut dyn PacketSource,
    config: &Config,
    (stream, drawn): (S, Option<&mut DrawnSink>),
    progress: &mut dyn FnMut(&Reading),
) -> Result<(Summary, S), Error> {
    let mut sink = Tee {
        stream,
        keep: drawn,
    };
    let summary = analyze_with_progress(source, config, &mut sink, progress)?;
    Ok((summary, sink.stream))
}

impl Run<'_> {
    /// Analyzes one input (or one merged group) and writes its report.
    fn one(&mut self, paths: &[PathBuf], out: &mut dyn Write) -> Result<(), Error> {
        let mut sources = Vec::with_capacity(paths.len());
        for p in paths {
            sources.push(FileSource::open_with(p, self.args.access(paths.len()))?);
        }
        let embedded = sources.iter().flat_map(|s| s.secrets_at_head()).collect();
        let mut source: Box<dyn PacketSource> = if sources.len() == 1 {
            match sources.pop() {
                Some(s) => Box::new(s),
                None => return Ok(()),
            }
        } else {
            Box::new(MergedSource::new(sources))
        };
        let config = self.config.with_secrets(embedded);
        let mut bar = status::Progress::new(&source.info().name, self.args.progress.quiet);
        // What `--html` draws, gathered as the records go by.
        let mut drawn = self.args.html.is_some().then(DrawnSink::new);
        let mut progress = |r: &Reading| bar.update(r);
        let source = source.as_mut();
        let summary = match self.args.format {
            Format::Jsonl => {
                let stream = (JsonlSink::new(out), drawn.as_mut());
                let (summary, mut jsonl) = through(source, &config, stream, &mut progress)?;
                jsonl.summary(&summary)?;
                summary
            }
            Format::Csv => {
                // Rows as connections finish (QUIC's too), like JSON
                // Lines: none is held.
                let file = source.info().name.clone();
                let stream = (self.csv.sink(&file, out)?, drawn.as_mut());
                let (summary, mut csv) = through(source, &config, stream, &mut progress)?;
                csv.finish()?;
                summary
            }
            Format::Json => {
                // Each record's text waits in a spool, not the record.
                // Laid out at the end on the analysis' threads.
                let sink = DocumentSink::new(out).on_threads(config.worker_threads(false));
                let stream = (sink, drawn.as_mut());
                let (summary, document) = through(source, &config, stream, &mut progress)?;
                document.finish(&summary)?;
                summary
            }
            Format::Table => {
                // The first rows (or all) as their cells' text, in a spool,
                // drawn at the end on the analysis' threads.
                let sink = TableSink::new(self.args.limit).on_threads(config.worker_threads(false));
                let stream = (sink, drawn.as_mut());
                let (summary, table) = through(source, &config, stream, &mut progress)?;
                if !self.first {
                    writeln!(out)?;
                }
                table.finish(&summary, out, &self.opts)?;
                summary
            }
        };
        bar.finish();
        self.first = false;
        out.flush()?;
        for w in &summary.warnings {
            eprintln!("handshakes: warning: {w}");
        }
        if let Some(drawn) = drawn {
            self.kept.push((summary, drawn.finish()));
        }
        Ok(())
    }
}
