//! The gate's words for what a capture could not support: why leaks were not judged (said of
//! "the capture", as a SKIP reason), and why "no OOM recorded" is no evidence.

use crate::analysis::leaks::MIN_RISING_STEPS;
use crate::analysis::NotJudged;

/// Why a capture could not support a leak judgement, as the gate says it.
pub fn gate_not_judged(reason: Option<NotJudged>, steps: usize, min_steps: usize) -> String {
    match reason {
        Some(NotJudged::NoHistory) => {
            "the capture has no allocation history (only the state at the dump)".into()
        }
        Some(NotJudged::SinglePass) => {
            "the capture is one pass through the program, not a loop".into()
        }
        Some(NotJudged::DecodingLoop) => {
            "the capture's loop is a decoding loop: tokens are not steps".into()
        }
        Some(NotJudged::TooFewSteps) => format!(
            "the capture has {steps} complete step{}; a leak judgement needs {min_steps}",
            if steps == 1 { "" } else { "s" },
        ),
        Some(NotJudged::RisingTooFewSteps) => format!(
            "memory rose at the end of every one of the capture's {steps} complete steps, too \
             few to tell a leak from warm-up (a leak finding needs {MIN_RISING_STEPS} rising steps)"
        ),
        Some(NotJudged::NoMemoryEvents) => {
            "the trace holds no memory events (recorded without profile_memory=True)".into()
        }
        Some(NotJudged::CutBeforeMemoryEvents) => {
            "the trace is cut short before any memory event (memory events may lie past the cut)"
                .into()
        }
        Some(NotJudged::CutShort) => {
            "the trace is cut short: frees, backward passes and memory events may lie past the cut"
                .into()
        }
        Some(NotJudged::CpuOnly) => "the trace's memory events are all on the CPU".into(),
        None => "the capture cannot support a leak judgement".into(),
    }
}

/// Why an OOM could not have been recorded, where it could not: a snapshot records OOMs in its
/// allocation history, a trace as memory events.
pub fn no_oom_record(reason: NotJudged) -> Option<&'static str> {
    match reason {
        NotJudged::NoHistory => {
            Some("the capture has no allocation history, where a snapshot records its OOMs")
        }
        NotJudged::NoMemoryEvents => Some(
            "the trace holds no memory events (recorded without profile_memory=True), \
             where a trace records its OOMs",
        ),
        NotJudged::CutBeforeMemoryEvents => Some(
            "the trace is cut short before any memory event, where a trace records its OOMs: \
             an OOM may lie past the cut",
        ),
        NotJudged::CutShort => Some(
            "the trace is cut short, and a trace records its OOMs as memory events: an OOM may \
             lie past the cut",
        ),
        NotJudged::CpuOnly => Some(
            "the trace's memory events are all on the CPU: it records no CUDA memory, so no \
             CUDA OOM",
        ),
        NotJudged::SinglePass
        | NotJudged::DecodingLoop
        | NotJudged::TooFewSteps
        | NotJudged::RisingTooFewSteps => None,
    }
}
