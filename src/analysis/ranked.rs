//! The report's findings, ranked by the bytes at stake.
//!
//! A user with one run and several findings fixes the one that costs most first. Each kind of
//! finding has its own measure of what is at stake, in bytes a fix would give back:
//!
//! * an OOM: what the failing work needed at least (allocated at the failure plus the request);
//!   an OOM caused by a leak or by retained attempts is that finding's, ranked there;
//! * a leak or retained attempts: the bytes it held (live at its last sample);
//! * reserved far above allocated: what the fix frees on every twin of its figure (the recorded
//!   reserved peak less the highest the fix's peak could be), else reserved beyond allocated;
//! * private pools: the least they raised the reserved peak on every twin (not a finding where
//!   the range reaches 0 or below).
//!
//! Ties keep the report's order (OOMs, leaks, then per device).

use super::oom::Cause;
use super::whatif::pools::PoolWhatIf;
use super::{Analysis, DeviceReport, LeakReport};

/// Which finding of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FindingRef {
    /// The `index`-th OOM of the device.
    Oom { device: u32, index: usize },
    /// The `index`-th entry of the report's `leaks`.
    Leak { index: usize },
    /// The device's `reserved_excess`.
    ReservedExcess { device: u32 },
    /// The device's `pool_whatif`.
    PrivatePools { device: u32 },
}

/// One finding and what is at stake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Ranked {
    #[serde(flatten)]
    pub finding: FindingRef,
    pub bytes_at_stake: u64,
}

fn of_device(d: &DeviceReport, out: &mut Vec<Ranked>) {
    if let Some(r) = &d.reserved_excess {
        out.push(Ranked {
            finding: FindingRef::ReservedExcess { device: d.device },
            bytes_at_stake: r.bytes_at_stake(),
        });
    }
    if let Some(PoolWhatIf::Computed { range, .. }) = &d.pool_whatif {
        if range.truth_low > 0 {
            out.push(Ranked {
                finding: FindingRef::PrivatePools { device: d.device },
                bytes_at_stake: range.truth_low as u64,
            });
        }
    }
}

/// The findings of `devices` and `leaks`, most bytes at stake first.
pub fn rank(devices: &[DeviceReport], leaks: &[LeakReport]) -> Vec<Ranked> {
    let mut out = Vec::new();
    for d in devices {
        for (i, o) in d.ooms.iter().enumerate() {
            if matches!(o.cause, Cause::Leak | Cause::RetainedAttempt) {
                continue;
            }
            out.push(Ranked {
                finding: FindingRef::Oom {
                    device: d.device,
                    index: i,
                },
                bytes_at_stake: o
                    .allocated_bytes
                    .saturating_add(o.rounded_bytes.max(o.requested_bytes)),
            });
        }
    }
    for (i, l) in leaks.iter().enumerate() {
        out.push(Ranked {
            finding: FindingRef::Leak { index: i },
            bytes_at_stake: l.leak.bytes_at_stake(),
        });
    }
    for d in devices {
        of_device(d, &mut out);
    }
    // Stable: ties keep the order above.
    out.sort_by_key(|r| std::cmp::Reverse(r.bytes_at_stake));
    out
}

/// Whether a list is worth its own section: two findings or more, of more than one kind (a
/// report of leaks alone already lists them).
pub fn mixed(ranked: &[Ranked]) -> bool {
    let kind = |r: &Ranked| std::mem::discriminant(&r.finding);
    ranked.len() >= 2 && ranked.iter().any(|r| kind(r) != kind(&ranked[0]))
}

impl Analysis {
    /// The report's findings, most bytes at stake first.
    pub fn ranked_findings(&self) -> Vec<Ranked> {
        rank(&self.devices, &self.leaks)
    }
}
