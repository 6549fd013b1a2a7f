//! The replay's consistency findings in words: an entry of the log the replayed layout could
//! not explain ([`AnomalyKind`]), and a difference between the replayed end state and the
//! snapshot's own segments ([`Mismatch`]).
//!
//! The JSON carries both as sentences inside a device's `consistency` object, among the
//! analysis' own fields, where `report::json` cannot add a field beside them: the analysis'
//! fields serialize through the functions here (`serialize_with`), beside the words.

use serde::{Serialize, Serializer};

use crate::analysis::replay::{AnomalyKind, Mismatch};

/// What an entry of the log did that the replay could not explain.
pub fn anomaly(a: &AnomalyKind) -> String {
    match *a {
        AnomalyKind::AllocOutsideSegments { addr } => {
            format!("alloc at 0x{addr:x} lies in no known segment")
        }
        AnomalyKind::AllocOverlaps { addr } => format!("alloc at 0x{addr:x} overlaps a live block"),
        AnomalyKind::AllocDoesNotFit {
            addr,
            rounded,
            free,
        } => {
            format!("alloc of {rounded} at 0x{addr:x} does not fit the free range of {free} there")
        }
        AnomalyKind::FreeRequestedNoBlock { addr } => {
            format!("free_requested at 0x{addr:x}: no live block there")
        }
        AnomalyKind::FreeRequestedTwice { addr } => {
            format!("free_requested at 0x{addr:x}: block already freed")
        }
        AnomalyKind::FreeCompletedOutsideSegments { addr } => {
            format!("free_completed at 0x{addr:x} lies in no known segment")
        }
        AnomalyKind::FreeCompletedNoBlock { addr } => {
            format!("free_completed at 0x{addr:x}: no live block there")
        }
        AnomalyKind::SegmentAllocOverlaps { addr } => {
            format!("segment_alloc at 0x{addr:x} overlaps a known segment")
        }
        AnomalyKind::SegmentFreeNoSegment { addr } => {
            format!("segment_free at 0x{addr:x}: no segment starts there")
        }
        AnomalyKind::SegmentFreeWithLiveBlocks { addr, blocks } => {
            format!("segment_free at 0x{addr:x} while {blocks} blocks are live in it")
        }
        AnomalyKind::EmptySegmentMap { addr } => format!("segment_map of 0 bytes at 0x{addr:x}"),
        AnomalyKind::UnmapOutsideSegments { addr } => {
            format!("segment_unmap at 0x{addr:x} lies in no known segment")
        }
    }
}

/// How the replayed end state differs from the snapshot at one address.
pub fn mismatch(m: &Mismatch) -> String {
    match *m {
        Mismatch::SegmentNotInSnapshot { addr, size } => format!(
            "replay has a segment at 0x{addr:x} ({size} bytes) that the snapshot does not list"
        ),
        Mismatch::SegmentNotReplayed { addr } => {
            format!("snapshot lists a segment at 0x{addr:x} that the replay does not have")
        }
        Mismatch::SegmentSize {
            addr,
            replay,
            snapshot,
        } => format!("segment at 0x{addr:x}: replay says {replay} bytes, snapshot {snapshot}"),
        Mismatch::BlockNotReplayed { addr, size, state } => format!(
            "block at 0x{addr:x} ({size} bytes, {state:?}) is live in the snapshot but not in the \
             replay"
        ),
        Mismatch::BlockNotInSnapshot { addr, size } => format!(
            "block at 0x{addr:x} ({size} bytes) is live in the replay but not in the snapshot"
        ),
        Mismatch::BlockDiffers {
            addr,
            replay: (rs, rst),
            snapshot: (ss, sst),
        } => format!("block at 0x{addr:x}: replay {rs} bytes {rst:?}, snapshot {ss} bytes {sst:?}"),
    }
}

/// Serializes an anomaly as its sentence (the JSON's `consistency.first_anomaly.what`,
/// unchanged since it was one).
pub fn serialize_anomaly<S: Serializer>(a: &AnomalyKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&anomaly(a))
}

/// Serializes the first mismatch as its sentence, or `null` (the JSON's
/// `consistency.first_mismatch`, unchanged since it was one).
pub fn serialize_mismatch<S: Serializer>(m: &Option<Mismatch>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_some(&mismatch(m)),
        None => s.serialize_none(),
    }
}

/// A replay anomaly's `what` in JSON: its sentence.
impl Serialize for AnomalyKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_anomaly(self, s)
    }
}

/// The replay's `first_mismatch` in JSON: its sentence.
impl Serialize for Mismatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&mismatch(self))
    }
}
