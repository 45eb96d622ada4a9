//! Progress of long operations (a backfill's enqueue, `purge`, any loop over
//! many items): a bar on stderr when stderr is a terminal and the output is
//! not `--json`; plain progress lines instead when stderr is a file or a pipe
//! (a log keeps them) and the caller asked for them; nothing with `--json`,
//! so stdout is only the JSON document and stderr stays quiet.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress shows.
#[derive(Debug)]
enum Mode {
    /// A live bar on stderr (a terminal).
    Bar(ProgressBar),
    /// One line per update on stderr: `<verb> <done>/<total> <unit> (<message>)`.
    Lines {
        verb: &'static str,
        unit: &'static str,
    },
    /// Nothing.
    Off,
}

/// The progress of one operation of `total` items.
#[derive(Debug)]
pub(crate) struct Progress {
    mode: Mode,
    total: u64,
}

/// Where progress goes for output of this kind: `(bar, lines)`.
pub(crate) fn shown(json: bool, stderr_is_terminal: bool) -> (bool, bool) {
    (!json && stderr_is_terminal, !json && !stderr_is_terminal)
}

impl Progress {
    /// Progress of `total` items: a bar on a terminal, else nothing (see
    /// [`Progress::lines`] for a log-friendly fallback).
    pub(crate) fn new(json: bool, total: u64) -> Progress {
        let (bar, _) = shown(json, std::io::stderr().is_terminal());
        let mode = if bar {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {pos}/{len} ({percent}%), ETA {eta} {msg}")
            {
                bar.set_style(style);
            }
            Mode::Bar(bar)
        } else {
            Mode::Off
        };
        Progress { mode, total }
    }

    /// As [`Progress::new`], but without a terminal (and without `--json`)
    /// each update prints `<verb> <done>/<total> <unit> (<message>)`.
    pub(crate) fn lines(
        json: bool,
        total: u64,
        verb: &'static str,
        unit: &'static str,
    ) -> Progress {
        let mut p = Progress::new(json, total);
        if matches!(p.mode, Mode::Off) && shown(json, std::io::stderr().is_terminal()).1 {
            p.mode = Mode::Lines { verb, unit };
        }
        p
    }

    /// `done` items of the total are done; `message` says how they went.
    pub(crate) fn update(&self, done: u64, message: &str) {
        match &self.mode {
            Mode::Bar(bar) => {
                bar.set_position(done);
                bar.set_message(message.to_owned());
            }
            Mode::Lines { verb, unit } => {
                eprintln!("{verb} {done}/{} {unit} ({message})", self.total);
            }
            Mode::Off => {}
        }
    }

    /// The operation ended: the bar is cleared from the terminal (the
    /// command's own output follows).
    pub(crate) fn finish(self) {
        if let Mode::Bar(bar) = self.mode {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn json_never_shows_progress_and_a_pipe_gets_lines() {
        assert_eq!(shown(true, true), (false, false));
        assert_eq!(shown(true, false), (false, false));
        assert_eq!(shown(false, true), (true, false));
        assert_eq!(shown(false, false), (false, true));
    }
}
