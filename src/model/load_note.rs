//! What a loader had to skip, repair or guess, as facts: the loaders fill [`LoadNote`]s, the
//! report's notes and the gate's "skipped" lines say them.
//!
//! The model sits below the analysis and the views, so the enum lives here and its sentences
//! in `crate::wording` (`load_note`): a loader decides what happened (which entry, how many,
//! at which byte), never how it is put, and the gate's summary files keep the sentences it
//! writes there.

/// One thing a loader skipped, repaired or guessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadNote {
    /// A snapshot's device log held entries without an `action`, which were skipped.
    EntriesWithoutAction { device: usize, skipped: usize },
    /// Blocks of a snapshot whose state torch never writes, counted as inactive.
    UnknownBlockStates { blocks: usize, first: UnknownState },
    /// The gzip stream broke off: the trace was read up to `offset` decompressed bytes.
    GzipDamaged { offset: u64, error: String },
    /// The file ended inside `traceEvents`, between events, before its closing bracket.
    TraceUnclosed { at_byte: usize, events: u64 },
    /// The file ended inside an event: the complete events before it were loaded.
    CutInsideEvent { at_byte: usize, events: u64 },
    /// Entries of `traceEvents` that are not valid events, skipped; the first one's error.
    InvalidEvents {
        skipped: u64,
        events: u64,
        first_at_byte: u64,
        error: String,
    },
    /// Events with raw control characters inside strings, read with them blanked.
    RawControlCharacters { events: u64 },
    /// Events with a lone UTF-16 surrogate escape in a string, read with U+FFFD in its place.
    LoneSurrogates { events: u64 },
}

/// The first block whose state was not one torch writes: where it is, and what it said
/// (`None`: no state at all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnknownState {
    pub segment: usize,
    pub block: usize,
    pub state: Option<String>,
}
