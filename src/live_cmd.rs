//! The `live` and `interfaces` subcommands: drive a live capture through
//! the same pipeline as files, print each connection as it finishes, keep a
//! status line on stderr when it is a terminal, and stop cleanly on Ctrl-C,
//! SIGTERM, `--duration` or `--count`.
//!
//! Does not analyze or format anything itself; without the `live` feature
//! it explains how to build with it.

#[cfg(not(feature = "live"))]
use std::process::ExitCode;

#[cfg(not(feature = "live"))]
pub fn run_live(_args: &crate::cli::LiveArgs) -> ExitCode {
    eprintln!("handshakes: {}", handshakes::LiveError::NotBuilt);
    ExitCode::from(2)
}

#[cfg(not(feature = "live"))]
pub fn run_interfaces() -> ExitCode {
    eprintln!("handshakes: {}", handshakes::LiveError::NotBuilt);
    ExitCode::from(2)
}

#[cfg(feature = "live")]
pub use imp::{run_interfaces, run_live};

#[cfg(feature = "live")]
mod imp {
    use std::io::{self, LineWriter, Write};
    use std::process::ExitCode;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use handshakes::analyze::Analyzer;
    use handshakes::record::{CaptureDrops, QuicRecord, Selection};
    use handshakes::report::csv::{CsvReport, CsvSink};
    use handshakes::report::json::JsonlSink;
    use handshakes::report::table::{self, LiveRows};
    use handshakes::source::live::{interfaces, LiveSource};
    use handshakes::time::Timestamp;
    use handshakes::{LiveError, RecordSink, Summary};

    use crate::cli::{LiveArgs, LiveFormat};
    use crate::status::Status;

    /// Packets read after the stop at most.
    const DRAIN_MAX: usize = 100_000;
    /// How long to wait when no packet is waiting.
    const IDLE_POLL: Duration = Duration::from_millis(2);
    const EXIT_OUTPUT: u8 = 1;
    const EXIT_INPUT: u8 = 2;

    fn wall_clock() -> Timestamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }

    pub fn run_interfaces() -> ExitCode {
        match interfaces() {
            Ok(list) => {
                let mut out = io::stdout().lock();
                for i in list {
                    let mut flags = Vec::new();
                    if i.up {
                        flags.push("up");
                    }
                    if i.loopback {
                        flags.push("loopback");
                    }
                    let desc = i
                        .description
                        .map(|d| format!("  ({d})"))
                        .unwrap_or_default();
                    let line = format!(
                        "{:<16} {:<14} {}{desc}",
                        i.name,
                        flags.join(","),
                        if i.addresses.is_empty() {
                            "-".to_string()
                        } else {
                            i.addresses.join(" ")
                        }
                    );
                    if writeln!(out, "{}", line.trim_end()).is_err() {
                        return ExitCode::SUCCESS;
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("handshakes: {e}");
                ExitCode::from(EXIT_INPUT)
            }
        }
    }

    /// Where finished connections go, by format.
    enum Output<'w> {
        Table(LiveRows<'w>),
        Jsonl(JsonlSink<'w>),
        Csv(Box<CsvSink<'w>>),
    }

    impl RecordSink for Output<'_> {
        fn record(&mut self, rec: handshakes::ConnectionRecord) -> io::Result<()> {
            match self {
                Output::Table(t) => t.record(rec),
                Output::Jsonl(j) => j.record(rec),
                // Each row out as its connection finishes, not when the
                // writer's buffer fills.
                Output::Csv(c) => {
                    c.record(rec)?;
                    c.finish()
                }
            }
        }

        fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
            match self {
                Output::Table(t) => t.quic(rec),
                Output::Jsonl(j) => j.quic(rec),
                Output::Csv(c) => {
                    c.quic(rec)?;
                    c.finish()
                }
            }
        }
    }

    impl Output<'_> {
        fn summary(&mut self, summary: &Summary) -> io::Result<()> {
            match self {
                Output::Table(t) => {
                    let out = t.out();
                    writeln!(out)?;
                    table::write_summary(summary, out)?;
                    out.flush()
                }
                Output::Jsonl(j) => j.summary(summary),
                // Rows only: the summary is for the other formats.
                Output::Csv(c) => c.finish(),
            }
        }
    }

    pub fn run_live(args: &LiveArgs) -> ExitCode {
        match live(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Usage(msg)) => {
                eprintln!("handshakes: {msg}");
                ExitCode::from(EXIT_INPUT)
            }
            Err(Failure::Exit(code)) => code,
            Err(Failure::Input(e)) => {
                eprintln!("handshakes: {e}");
                ExitCode::from(EXIT_INPUT)
            }
            Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(Failure::Output(e)) => {
                eprintln!("handshakes: writing output: {e}");
                ExitCode::from(EXIT_OUTPUT)
            }
        }
    }

    enum Failure {
        Usage(String),
        /// Reported already.
        Exit(ExitCode),
        Input(LiveError),
        Output(io::Error),
    }

    impl From<LiveError> for Failure {
        fn from(e: LiveError) -> Failure {
            Failure::Input(e)
        }
    }

    impl From<io::Error> for Failure {
        fn from(e: io::Error) -> Failure {
            Failure::Output(e)
        }
    }

    fn live(args: &LiveArgs) -> Result<(), Failure> {
        let mut config = args.config().map_err(Failure::Usage)?;
        // The client appends its secrets as it connects: the log is followed.
        config.keylog = crate::commands::load_keylog(&args.tls, true).map_err(Failure::Exit)?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = Arc::clone(&stop);
            // SIGINT and SIGTERM ("termination" feature): stop reading, then
            // report. Installed before the device opens, so no signal is lost.
            let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
        }
        let mut source = LiveSource::open(
            &args.interface,
            args.filter.as_deref(),
            args.write.as_deref(),
        )?;
        let mut stdout = LineWriter::new(io::stdout().lock());
        let mut output = match args.format {
            LiveFormat::Table => Output::Table(LiveRows::new(&mut stdout)),
            LiveFormat::Jsonl => Output::Jsonl(JsonlSink::new(&mut stdout)),
            LiveFormat::Csv => Output::Csv(Box::new(
                CsvReport::new().sink(&args.interface, &mut stdout)?,
            )),
        };
        let status = Status::new(&args.interface);
        let mut analyzer = Analyzer::new(config);
        let started = Instant::now();
        let mut last_tick = Instant::now();
        let mut packets = 0u64;
        loop {
            if stop.load(Ordering::SeqCst)
                || args.duration.is_some_and(|d| started.elapsed() >= d)
                || args.count.is_some_and(|c| packets >= c)
            {
                break;
            }
            match source.poll()? {
                Some(packet) => {
                    packets += 1;
                    analyzer.packet(&packet, &mut output)?;
                }
                // Nothing waiting: the kernel buffers packets meanwhile.
                None => std::thread::sleep(IDLE_POLL),
            }
            if last_tick.elapsed() >= Duration::from_secs(1) {
                last_tick = Instant::now();
                analyzer.tick(wall_clock(), &mut output)?;
                status.update(started.elapsed(), &analyzer.progress());
            }
        }
        // Packets already in the kernel's buffer when the stop came are still
        // part of the capture (bounded, in case the interface is busy).
        if args.count.is_none() {
            for _ in 0..DRAIN_MAX {
                match source.poll()? {
                    Some(packet) => analyzer.packet(&packet, &mut output)?,
                    None => break,
                }
            }
        }
        status.finish();
        source.flush()?;
        let drops = source.drops();
        let mut summary = analyzer.finish(source.info(), &mut output)?;
        // The kernel ran the capture filter: the figures are about what it
        // kept (and of that, the connections --port, --host and --overlay
        // kept).
        if let Some(filter) = &args.filter {
            let selection = summary.selection.get_or_insert_with(Selection::default);
            selection.filter = Some(filter.clone());
        }
        summary.capture_drops = drops.map(|d| CaptureDrops {
            received: d.received,
            dropped: d.dropped,
            if_dropped: d.if_dropped,
        });
        output.summary(&summary)?;
        Ok(())
    }
}
