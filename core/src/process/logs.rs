//! A process step's stdout and stderr: each line goes to the worker's tracing
//! output (with the job and step as fields), the last bytes of each stream
//! are kept as a bounded tail, and `::progress N` lines on stdout report the
//! step's progress. Memory stays bounded whatever the child writes. The
//! tails and the progress are shared ([`Captured`]) with the step's reporter,
//! which writes them to Redis while the step runs, and with the step's end:
//! what was read is kept even when a reader is stopped before its pipe
//! closed (a `setsid` child holding it open).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// The longest line passed on as one: a longer one is cut into pieces.
const MAX_LINE: usize = 8 * 1024;

/// The prefix of a progress line on stdout: `::progress 40` (0 to 100).
pub const PROGRESS_PREFIX: &str = "::progress ";

/// The last `cap` bytes written to a stream, and how many there were in all.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Tail {
        Tail {
            bytes: VecDeque::with_capacity(cap.min(64 * 1024)),
            cap,
            total: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if self.cap == 0 {
            return;
        }
        let data = &data[data.len().saturating_sub(self.cap)..];
        let excess = (self.bytes.len() + data.len()).saturating_sub(self.cap);
        self.bytes.drain(..excess);
        self.bytes.extend(data);
    }

    /// Bytes written in all.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text (invalid UTF-8 replaced), starting at a line
    /// boundary when earlier bytes were dropped.
    pub(crate) fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut all = Vec::with_capacity(a.len() + b.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        let start = if self.total > self.bytes.len() as u64 {
            all.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1)
        } else {
            0
        };
        String::from_utf8_lossy(&all[start..]).into_owned()
    }
}

/// The progress in a stdout line, if it is a progress line (`::progress 40`,
/// `::progress 12.5`; clamped to 0..=100).
pub(crate) fn progress_of(line: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(line).ok()?;
    let value: f64 = text.strip_prefix(PROGRESS_PREFIX)?.trim().parse().ok()?;
    value.is_finite().then(|| value.clamp(0.0, 100.0))
}

/// What a step's two readers have kept so far: both tails and the last
/// progress, and a notification at each change (for the reporter).
#[derive(Debug)]
pub(crate) struct Captured {
    /// The tail of stdout.
    stdout: Mutex<Tail>,
    /// The tail of stderr.
    stderr: Mutex<Tail>,
    /// The last progress reported.
    progress: Mutex<Option<f64>>,
    /// Notified (one permit kept) at each line or progress report.
    changed: Notify,
}

/// A copy of what [`Captured`] holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// The kept stdout text.
    pub(crate) stdout_tail: String,
    /// The kept stderr text.
    pub(crate) stderr_tail: String,
    /// Bytes written to stdout in all.
    pub(crate) stdout_bytes: u64,
    /// Bytes written to stderr in all.
    pub(crate) stderr_bytes: u64,
    /// The last progress reported.
    pub(crate) progress: Option<f64>,
}

impl Captured {
    /// Empty tails keeping at most `cap` bytes each.
    pub(crate) fn new(cap: usize) -> Arc<Captured> {
        Arc::new(Captured {
            stdout: Mutex::new(Tail::new(cap)),
            stderr: Mutex::new(Tail::new(cap)),
            progress: Mutex::new(None),
            changed: Notify::new(),
        })
    }

    /// Completes at the first change since the last call returned.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    /// A copy of the tails and the progress now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let tail = |t: &Mutex<Tail>| match t.lock() {
            Ok(t) => (t.text(), t.total()),
            Err(poisoned) => {
                let t = poisoned.into_inner();
                (t.text(), t.total())
            }
        };
        let (stdout_tail, stdout_bytes) = tail(&self.stdout);
        let (stderr_tail, stderr_bytes) = tail(&self.stderr);
        Snapshot {
            stdout_tail,
            stdout_bytes,
            stderr_tail,
            stderr_bytes,
            progress: self.progress.lock().map(|p| *p).unwrap_or(None),
        }
    }
}

/// Which stream a reader reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Standard output (progress lines come on it).
    Stdout,
    /// Standard error.
    Stderr,
}

/// Where a stream's lines go.
pub(crate) struct Sink {
    /// The stream read.
    pub(crate) stream: Stream,
    /// The job, for the log lines' fields.
    pub(crate) job: String,
    /// The step, for the log lines' fields.
    pub(crate) step: &'static str,
    /// The kept tails and progress.
    pub(crate) captured: Arc<Captured>,
}

impl Sink {
    fn line(&mut self, line: &[u8], complete: bool) {
        let body = match line {
            [rest @ .., b'\r'] if complete => rest,
            _ => line,
        };
        if self.stream == Stream::Stdout {
            if let Some(value) = progress_of(body) {
                debug!(job = %self.job, step = self.step, progress = value, "progress");
                if let Ok(mut p) = self.captured.progress.lock() {
                    *p = Some(value);
                }
                self.captured.changed.notify_one();
                return;
            }
        }
        let (stream, tail) = match self.stream {
            Stream::Stdout => ("stdout", &self.captured.stdout),
            Stream::Stderr => ("stderr", &self.captured.stderr),
        };
        // at DEBUG: the tail keeps the last lines anyway, and a chatty step
        // must not fill the worker's log (RUST_LOG=leasehold::process=debug shows them)
        debug!(
            target: "leasehold::process",
            job = %self.job,
            step = self.step,
            stream,
            "{}",
            crate::visible::visible_line(&String::from_utf8_lossy(body))
        );
        if let Ok(mut tail) = tail.lock() {
            tail.push(line);
            if complete {
                tail.push(b"\n");
            }
        }
        self.captured.changed.notify_one();
    }
}

/// Reads `reader` to its end, or until `stop` fires with nothing more ready
/// to read, passing each line to `sink` (a last unfinished line too).
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    mut sink: Sink,
    stop: CancellationToken,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let read = tokio::select! {
            // what is in the pipe already is read before a stop is honoured
            biased;
            read = reader.read(&mut chunk) => read,
            () = stop.cancelled() => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            match rest.iter().position(|&c| c == b'\n') {
                Some(i) if line.len() + i <= MAX_LINE => {
                    line.extend_from_slice(&rest[..i]);
                    sink.line(&line, true);
                    line.clear();
                    rest = &rest[i + 1..];
                }
                _ => {
                    let room = MAX_LINE - line.len();
                    let take = rest.len().min(room);
                    line.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if line.len() >= MAX_LINE {
                        sink.line(&line, false);
                        line.clear();
                    }
                }
            }
        }
    }
    if !line.is_empty() {
        sink.line(&line, false);
    }
}

#[cfg(test)]
mod tests {
    use super::{progress_of, Tail};

    #[test]
    fn the_tail_keeps_the_last_bytes_from_a_line_start() {
        let mut tail = Tail::new(10);
        tail.push(b"first line\n");
        tail.push(b"ab\ncd\n");
        assert_eq!(tail.total(), 17);
        assert_eq!(tail.text(), "ab\ncd\n");
        let mut small = Tail::new(100);
        small.push(b"a\nb\n");
        assert_eq!(small.text(), "a\nb\n");
    }

    #[test]
    fn progress_lines() {
        assert_eq!(progress_of(b"::progress 40"), Some(40.0));
        assert_eq!(progress_of(b"::progress 12.5 "), Some(12.5));
        assert_eq!(progress_of(b"::progress 140"), Some(100.0));
        assert_eq!(progress_of(b"::progress x"), None);
        assert_eq!(progress_of(b"progress 4"), None);
    }
}
