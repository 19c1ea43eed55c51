//! What the binary shows on standard error while it works, and only when
//! standard error is a terminal: the progress of reading a capture
//! (`analyze`, `compare`, `timeline`) and live capture's status line. The
//! only module that names `indicatif`.
//!
//! Does not read or analyse anything: it is told how far the work has come.

use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

use handshakes::analyze::Progress as Totals;
use handshakes::report::sanitize;
use handshakes::Reading;

/// Files smaller than this are read too fast to need a progress display…
const FILE_FROM: u64 = 100 << 20;
/// …and an input of unknown size (standard input, a pipe) gets one once
/// this much has been read or this long has passed.
const UNKNOWN_AFTER: Duration = Duration::from_secs(1);

/// A file of known size: bar, bytes, rate and time left; the running totals
/// under it (cut to the terminal's width).
const BAR: &str = "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}\n{wide_msg}";
/// An input of unknown size: bytes so far, rate and time so far.
const SPINNER: &str = "{spinner} {bytes} read, {bytes_per_sec}, {elapsed}\n{wide_msg}";

/// What a progress display shows for an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Nothing yet (a small file, or not long enough).
    Nothing,
    /// A bar to the file's size.
    Bar(u64),
    /// Bytes and rate, with no end known.
    Spinner,
}

/// The display `reading` calls for `elapsed` into the input.
fn shape(reading: &Reading, elapsed: Duration) -> Shape {
    match reading.size {
        Some(size) if size >= FILE_FROM => Shape::Bar(size),
        Some(_) => Shape::Nothing,
        None if reading.read >= FILE_FROM || elapsed >= UNKNOWN_AFTER => Shape::Spinner,
        None => Shape::Nothing,
    }
}

/// The running totals as one line: `open 12 · closed 3400 · requests 9100
/// · TCP handshakes per request 0.37`.
pub fn totals_line(t: &Totals) -> String {
    let per_request = if t.requests > 0 {
        format!("{:.2}", t.tcp_handshakes as f64 / t.requests as f64)
    } else {
        "-".into()
    };
    format!(
        "open {} · closed {} · requests {} · TCP handshakes per request {per_request}",
        t.open, t.finished, t.requests
    )
}

/// The progress of reading one input (a file, standard input, or files
/// merged), on standard error when it is a terminal.
pub struct Progress {
    /// Whom the totals line names (the file, or compare's side).
    name: String,
    enabled: bool,
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// A display for the input called `name` (`-`: standard input),
    /// unless `quiet`.
    pub fn new(name: &str, quiet: bool) -> Progress {
        Progress {
            // A file's name may hold anything, escape sequences included.
            name: match name {
                "-" => "standard input".into(),
                name => sanitize(name),
            },
            enabled: !quiet && io::stderr().is_terminal(),
            started: Instant::now(),
            bar: None,
        }
    }

    /// Shows how far the reading has come.
    pub fn update(&mut self, reading: &Reading) {
        if !self.enabled {
            return;
        }
        let bar = match &self.bar {
            Some(bar) => bar,
            None => {
                let (bar, template) = match shape(reading, self.started.elapsed()) {
                    Shape::Nothing => return,
                    Shape::Bar(size) => (indicatif::ProgressBar::new(size), BAR),
                    Shape::Spinner => (indicatif::ProgressBar::new_spinner(), SPINNER),
                };
                if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                    bar.set_style(style);
                }
                self.bar.insert(bar)
            }
        };
        bar.set_position(reading.read);
        bar.set_message(format!("{} · {}", self.name, totals_line(&reading.so_far)));
    }

    /// Clears the display (the report goes where it was).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Live capture's one-line status, on standard error when it is a terminal.
#[cfg(feature = "live")]
pub struct Status {
    bar: Option<indicatif::ProgressBar>,
}

#[cfg(feature = "live")]
impl Status {
    pub fn new(interface: &str) -> Status {
        let bar = io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_message(format!("capturing on {interface}…"));
            bar
        });
        Status { bar }
    }

    pub fn update(&self, elapsed: Duration, totals: &Totals) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{}s · {}", elapsed.as_secs(), totals_line(totals)));
            bar.tick();
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(read: u64, size: Option<u64>) -> Reading {
        Reading {
            read,
            size,
            ..Reading::default()
        }
    }

    #[test]
    fn a_bar_for_large_files_only() {
        let now = Duration::ZERO;
        let late = Duration::from_secs(60);
        assert_eq!(
            shape(&reading(0, Some(FILE_FROM)), now),
            Shape::Bar(FILE_FROM)
        );
        assert_eq!(
            shape(&reading(5, Some(FILE_FROM - 1)), late),
            Shape::Nothing
        );
        assert_eq!(shape(&reading(0, Some(0)), late), Shape::Nothing);
    }

    #[test]
    fn a_spinner_for_input_of_unknown_size_once_it_is_large_or_slow() {
        let now = Duration::ZERO;
        assert_eq!(shape(&reading(FILE_FROM - 1, None), now), Shape::Nothing);
        assert_eq!(shape(&reading(FILE_FROM, None), now), Shape::Spinner);
        assert_eq!(shape(&reading(0, None), UNKNOWN_AFTER), Shape::Spinner);
    }

    #[test]
    fn the_totals_line() {
        let t = Totals {
            open: 12,
            finished: 3400,
            requests: 9100,
            tcp_handshakes: 3412,
        };
        assert_eq!(
            totals_line(&t),
            "open 12 · closed 3400 · requests 9100 · TCP handshakes per request 0.37"
        );
        assert_eq!(
            totals_line(&Totals::default()),
            "open 0 · closed 0 · requests 0 · TCP handshakes per request -"
        );
    }

    #[test]
    fn the_templates_parse() {
        for t in [BAR, SPINNER] {
            assert!(indicatif::ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }
}
