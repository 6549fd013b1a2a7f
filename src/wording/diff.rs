//! The diff's words (`memscope diff`, and the baseline rules' evidence): a figure's change
//! between two captures, and a site's. `check::diff` computes the typed changes and passes
//! their figures here as plain values (`wording` sits below `check`).

use crate::analysis::sites::Site;
use crate::units;

use super::gate::site_words;

/// One side of a compared figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    pub bytes: u64,
    /// A lower bound (a peak seen in a log that did not start from an empty allocator).
    pub lower_bound: bool,
    /// The side records no such figure: `bytes` is 0 for want of one.
    pub unrecorded: bool,
}

/// `1.0 GiB -> 1.5 GiB (+512.0 MiB, +50.0%)`; a lower bound keeps its `>=`, and the change
/// says how far it can be trusted: at least (the after side is a bound), at most (the before
/// side is), or unknown (both are, or a side records no figure).
pub fn delta_words(before: Side, after: Side, delta: i64) -> String {
    let bound = |s: Side| {
        format!(
            "{}{}",
            if s.lower_bound { ">= " } else { "" },
            units::bytes(s.bytes)
        )
    };
    if before.unrecorded || after.unrecorded {
        let side = |s: Side| {
            if s.unrecorded {
                "not recorded".to_owned()
            } else {
                bound(s)
            }
        };
        return format!("{} -> {} (change unknown)", side(before), side(after));
    }
    let pct = if before.bytes > 0 {
        format!(", {:+.1}%", delta as f64 * 100.0 / before.bytes as f64)
    } else {
        String::new()
    };
    let change = match (before.lower_bound, after.lower_bound) {
        (false, false) => format!("{}{pct}", units::signed_bytes(delta)),
        (false, true) => format!("at least {}{pct}", units::signed_bytes(delta)),
        (true, false) => format!("at most {}{pct}", units::signed_bytes(delta)),
        (true, true) => "change unknown: both sides are lower bounds".to_owned(),
    };
    format!("{} -> {} ({change})", bound(before), bound(after))
}

/// A site's change between two captures, as one line.
#[derive(Clone, Copy, Debug)]
pub struct SiteChangeWords<'a> {
    pub delta_bytes: i64,
    /// `new`, `gone`, `grown`, `shrunk`, `moved`, `same`.
    pub status: &'a str,
    pub site: &'a Option<Site>,
    /// For a moved site: where it was before.
    pub moved_from: &'a Option<Site>,
    /// `None`: not among the side's top sites.
    pub before_bytes: Option<u64>,
    pub after_bytes: Option<u64>,
    /// The side that lacks the site listed only its top sites.
    pub below_top: bool,
}

/// `+64.0 MiB grown train.py:12 in step (64.0 MiB -> 128.0 MiB)`.
pub fn site_change(c: SiteChangeWords) -> String {
    let site = c
        .site
        .as_ref()
        .map_or_else(|| "(no Python stack)".into(), |s| site_words(s, true));
    let b = |v: Option<u64>| v.map_or_else(|| "absent".into(), units::bytes);
    let site = match c.moved_from {
        Some(m) if m.file == c.site.as_ref().map_or("", |s| &s.file) => {
            format!("{site} (was line {})", m.line)
        }
        Some(m) => format!("{site} (was {m})"),
        None => site,
    };
    format!(
        "{} {} {} ({} -> {}){}",
        units::signed_bytes(c.delta_bytes),
        c.status,
        site,
        b(c.before_bytes),
        b(c.after_bytes),
        if c.below_top {
            ", absent side lists only its top sites"
        } else {
            ""
        }
    )
}
