//! The live progress line on stderr.
//!
//! While a load or a measured run is under way, one line on stderr is rewritten in place
//! (`\r`, then the line, then "erase to end of line"). It is drawn only when stderr is a
//! terminal: redirected to a file or a pipe, a run prints nothing here, so logs and scripted
//! output stay clean. [`ProgressLine::finish`] erases the line so the report that follows
//! starts at column 0.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A rewritable status line on stderr; a no-op when stderr is not a terminal.
pub struct ProgressLine {
    enabled: bool,
    /// Whether something was drawn that `finish` must erase.
    drawn: bool,
    last_draw: Option<Instant>,
}

/// Redraw at most this often: a terminal cannot show more, and drawing costs a system call.
const REDRAW_INTERVAL: Duration = Duration::from_millis(100);

impl ProgressLine {
    /// A line drawn only if stderr is a terminal.
    pub fn stderr() -> ProgressLine {
        ProgressLine::with_enabled(std::io::stderr().is_terminal())
    }

    /// A line that draws (or not) regardless of where stderr goes.
    pub fn with_enabled(enabled: bool) -> ProgressLine {
        ProgressLine {
            enabled,
            drawn: false,
            last_draw: None,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Replaces the line's text (rate-limited to [`REDRAW_INTERVAL`]); `text` is built only
    /// when it will be drawn.
    pub fn update(&mut self, text: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Some(last) = self.last_draw {
            if now.duration_since(last) < REDRAW_INTERVAL {
                return;
            }
        }
        self.draw(now, &text());
    }

    /// Replaces the line's text now, however recently it was drawn: for a step that is
    /// reported once and then lasts (a table a verification walks), which a rate-limited
    /// [`ProgressLine::update`] could drop, leaving the step before it on the line.
    pub fn update_now(&mut self, text: impl FnOnce() -> String) {
        if self.enabled {
            self.draw(Instant::now(), &text());
        }
    }

    fn draw(&mut self, now: Instant, text: &str) {
        self.last_draw = Some(now);
        let mut err = std::io::stderr().lock();
        // A failed write to the terminal only loses a progress line; the run goes on.
        let _ = write!(err, "\r{text}\x1b[K");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the line.
    pub fn finish(&mut self) {
        if self.enabled && self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
        self.drawn = false;
        self.last_draw = None;
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A short bar for a fraction in `0.0..=1.0`, e.g. `[#####     ]`.
pub fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), " ".repeat(width - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_is_clamped_and_fixed_width() {
        assert_eq!(bar(0.0, 4), "[    ]");
        assert_eq!(bar(0.5, 4), "[##  ]");
        assert_eq!(bar(7.0, 4), "[####]");
        assert_eq!(bar(-1.0, 4), "[    ]");
        assert_eq!(bar(f64::NAN, 4).len(), 6);
    }

    #[test]
    fn disabled_line_never_builds_its_text() {
        let mut p = ProgressLine::with_enabled(false);
        p.update(|| panic!("text built for a disabled line"));
        p.update_now(|| panic!("text built for a disabled line"));
        p.finish();
    }
}
