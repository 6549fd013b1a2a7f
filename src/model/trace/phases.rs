//! Wall-clock timings of the trace path's phases, for issue #43's measurements: with
//! `MEMSCOPE_PHASES=1` in the environment, each timed phase writes one line to stderr when it
//! ends (`phase NAME SECONDS`). Why in the code and not in a profiler: on the 16-core host the
//! question is which phase is on the critical path while others run beside it, which a
//! sampling profile of all threads does not say.
//!
//! The variable is read once per process; without it a phase costs one load of a flag, and
//! nothing is ever written (outputs are the same either way: stdout is never touched).

use std::sync::OnceLock;
use std::time::Instant;

/// The environment variable that switches the timings on.
pub const VAR: &str = "MEMSCOPE_PHASES";

/// Whether phases are timed (`MEMSCOPE_PHASES=1`), read once.
pub fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(VAR).is_ok_and(|v| v.trim() == "1"))
}

/// A phase being timed: its line is written when it is dropped (or [`Phase::end`]ed).
#[must_use = "a phase is timed until it is dropped"]
pub struct Phase {
    name: &'static str,
    start: Option<Instant>,
}

impl Phase {
    /// Starts timing `name` (a no-op unless [`on`]).
    pub fn start(name: &'static str) -> Phase {
        Phase {
            name,
            start: on().then(Instant::now),
        }
    }

    /// Ends the phase now.
    pub fn end(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(t) = self.start {
            eprintln!("phase {} {:.3}", self.name, t.elapsed().as_secs_f64());
        }
    }
}

/// Writes `phase NAME SECONDS` for a duration measured elsewhere (a sum over a loop's turns).
pub fn record(name: &'static str, secs: f64) {
    if on() {
        eprintln!("phase {name} {secs:.3}");
    }
}
