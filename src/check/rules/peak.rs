//! `max-peak` / `max-reserved` (`--max-peak`, `--max-reserved`): a memory budget.
//!
//! - **Detects**: the highest allocated (reserved) bytes on any device over the limit: exact
//!   where the log starts from an empty allocator, else the highest seen (a lower bound, said
//!   so in the message).
//! - **Cannot judge (SKIP, or an error since the limit was set)**: a capture that recorded no
//!   device memory, or no reserved bytes. A trace that gives allocated bytes only as changes
//!   from its start (torch 1.9) bounds the peak from below: that bound over the limit FAILs
//!   (the peak was at least that), under it SKIPs with the reason, since it cannot show the
//!   peak within the limit (docs/how-it-decides.md). A PASS holds on every device.
//! - **Evidence**: what was live at the peak, by line (up to three sites).
//! - **Fix**: shrink what those lines hold at the peak (`memscope analyze` breaks the peak
//!   down by category and line), or raise the budget.

use super::{lines_known, site_lines, skip_unless, Measurable, Rule, RuleId, Skip, Unmeasured};
use crate::analysis::CaptureKind;
use crate::check::summary::{DeviceSummary, InputSummary, Standing};
use crate::check::{Measure, RuleResult, Unit};
use crate::wording::gate::Caveat;

/// `reserved: false` is `max-peak`, `true` is `max-reserved`.
pub struct PeakRule {
    pub limit: u64,
    pub reserved: bool,
}

impl PeakRule {
    fn measure(&self, device: &str) -> Measure {
        let device = device.to_owned();
        if self.reserved {
            Measure::PeakReserved { device }
        } else {
            Measure::PeakAllocated { device }
        }
    }
    fn standing(&self, s: &InputSummary, d: &DeviceSummary) -> Standing {
        if self.reserved {
            s.reserved_standing(&d.device)
        } else {
            s.allocated_standing(&d.device)
        }
    }
    fn get(&self, d: &DeviceSummary) -> u64 {
        if self.reserved {
            d.peak_reserved_bytes
        } else {
            d.peak_allocated_bytes
        }
    }
}

impl Rule for PeakRule {
    fn id(&self) -> RuleId {
        if self.reserved {
            RuleId::MaxReserved
        } else {
            RuleId::MaxPeak
        }
    }
    fn measurable(&self, s: &InputSummary) -> Measurable {
        if s.devices.is_empty() {
            return Measurable::Nothing(Skip::NoDeviceMemory);
        }
        match s
            .devices
            .iter()
            .find(|d| self.standing(s, d) != Standing::Unrecorded)
        {
            Some(_) => Measurable::Yes,
            None => Measurable::Nothing(Skip::Unmeasured(Unmeasured::NoReserved {
                device: s.devices[0].device.clone(),
            })),
        }
    }
    fn apply(&self, s: &InputSummary) -> RuleResult {
        if let Some(r) = skip_unless(self, Unit::Bytes, s) {
            return r;
        }
        let id = self.id();
        let Some(d) = s
            .devices
            .iter()
            .filter(|d| self.standing(s, d) != Standing::Unrecorded)
            .max_by_key(|d| self.get(d))
        else {
            return RuleResult::skip(id, Unit::Bytes, Skip::NoDeviceMemory);
        };
        let mut r = RuleResult::limit(
            id,
            Unit::Bytes,
            self.get(d) as f64,
            self.limit as f64,
            self.measure(&d.device),
        );
        if !d.peak_exact && s.kind == CaptureKind::Snapshot {
            r.caveat(Caveat::HistoryMissing);
        }
        if r.failed() {
            if self.standing(s, d) == Standing::AtLeast {
                r.caveat(Caveat::FromTraceStart);
            }
            r.site = d.sites_at_peak.first().and_then(|x| x.site.clone());
            r.evidence = site_lines(&d.sites_at_peak, lines_known(s));
            return r;
        }
        // A PASS holds for every device: one known only from below, or not at all, cannot give it.
        for u in &s.devices {
            let why = match self.standing(s, u) {
                Standing::Measured => continue,
                Standing::AtLeast => Unmeasured::BoundWithin {
                    measure: self.measure(&u.device),
                    bound: self.get(u),
                },
                Standing::Unrecorded => Unmeasured::NoReserved {
                    device: u.device.clone(),
                },
            };
            return RuleResult::skip(id, Unit::Bytes, Skip::Unmeasured(why));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::super::trace_summary as summary;
    use super::*;
    use crate::check::Status;

    #[test]
    fn a_lower_bound_fails_over_the_limit_and_never_passes_under_it() {
        let rule = |limit| PeakRule {
            limit,
            reserved: false,
        };
        // cuda:1 was at least 3 GiB: over 2 GiB whatever it started from.
        let r = rule(2 << 30).apply(&summary(3 << 30));
        assert_eq!(r.status, Status::Fail, "{}", r.message);
        assert!(r.message.contains("cuda:1") && r.message.contains("lower bound"));
        // Both under 2 GiB, but cuda:1's bound cannot show its peak was.
        let r = rule(2 << 30).apply(&summary(512 << 20));
        assert_eq!(r.status, Status::Skip, "{}", r.message);
        assert!(r.message.contains("cuda:1"), "{}", r.message);
        // cuda:0 over the limit fails, whatever cuda:1 is.
        let r = rule(256 << 20).apply(&summary(1 << 20));
        assert_eq!(r.status, Status::Fail, "{}", r.message);
        assert!(r.message.contains("cuda:0"), "{}", r.message);
        // Reserved: cuda:0's PASS does not cover cuda:1, which records none.
        let r = PeakRule {
            limit: 1 << 40,
            reserved: true,
        }
        .apply(&summary(0));
        assert_eq!(r.status, Status::Skip, "{}", r.message);
        assert!(r.message.contains("no reserved bytes on cuda:1"));
    }
}
