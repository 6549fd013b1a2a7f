//! Geometry for the HTML report's charts: round ticks, text boxes, and labels placed in the
//! margins so that no label covers the data it annotates.
//!
//! The charts' text is set in a monospace font, so a label's width is known here without a
//! browser ([`CHAR_EM`] per character), and the placement can be checked by parsing the SVG.

use crate::units::bytes;

/// Advance of one monospace character, in ems (DejaVu Sans Mono, Menlo and Consolas are at or
/// under 0.6).
pub const CHAR_EM: f64 = 0.6;
/// Font stack of the charts' text (monospace, see [`CHAR_EM`]).
pub const FONT: &str = r#"ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace"#;

/// An axis-aligned box in the SVG's user units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

impl Rect {
    /// Whether the two boxes overlap once `self` is widened by `gap` on the left and right.
    pub fn hits(&self, o: &Rect, gap: f64) -> bool {
        self.x1 - gap < o.x2 && o.x1 < self.x2 + gap && self.y1 < o.y2 && o.y1 < self.y2
    }
}

/// Width of `s` at `size` px in the charts' font.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * CHAR_EM
}

/// Box of a one-line label drawn at baseline `y`: from the cap height down to the descenders.
pub fn text_box(s: &str, size: f64, x: f64, y: f64, anchor: Anchor) -> Rect {
    let w = text_width(s, size);
    let x1 = match anchor {
        Anchor::Start => x,
        Anchor::Middle => x - w / 2.0,
        Anchor::End => x - w,
    };
    Rect {
        x1,
        y1: y - size * 0.8,
        x2: x1 + w,
        y2: y + size * 0.25,
    }
}

/// SVG `text-anchor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    pub fn svg(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// Round byte ticks from 0: a power-of-two step giving at most 8 intervals. Returns the step
/// and the top of the axis (a multiple of the step at or above `max`).
pub fn byte_ticks(max: u64) -> (u64, u64) {
    let max = max.max(1);
    let mut step = 1u64;
    while max.div_ceil(step) > 8 {
        step *= 2;
    }
    (step, max.div_ceil(step) * step)
}

/// A round byte value without trailing zeros: `0`, `512 MiB`, `1.5 GiB`, `1.25 GiB`.
pub fn tick_bytes(v: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if v == 0 {
        return "0".into();
    }
    if v < 1024 {
        return bytes(v);
    }
    let mut x = v as f64;
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", UNITS[u])
}

/// Round event ticks in `0..n`: a 1-2-5 step giving at most `most` ticks.
pub fn event_ticks(n: usize, most: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let most = most.max(2);
    let mut step = 1usize;
    'find: loop {
        for m in [1, 2, 5] {
            if (n - 1) / (step * m) < most {
                step *= m;
                break 'find;
            }
        }
        step *= 10;
    }
    (0..n).step_by(step).collect()
}

/// Seconds since the first timed event for each tick, with the fewest decimals (up to
/// microseconds) that tell neighbouring ticks apart. A tick whose time equals the previous
/// tick's even at microseconds gets no label (`None`), as does a tick without a time.
pub fn time_labels(us: &[Option<i64>]) -> Vec<Option<String>> {
    let secs: Vec<Option<f64>> = us.iter().map(|t| t.map(|t| t as f64 / 1e6)).collect();
    let fmt = |v: f64, d: usize| format!("{v:.d$} s");
    let timed: Vec<f64> = secs.iter().flatten().copied().collect();
    let distinct_at = |d: usize| {
        timed
            .windows(2)
            .all(|w| fmt(w[0], d) != fmt(w[1], d) || (w[1] - w[0]).abs() < 5e-7)
    };
    let d = (0..=6).find(|&d| distinct_at(d)).unwrap_or(6);
    let mut last: Option<String> = None;
    secs.iter()
        .map(|t| {
            let s = fmt((*t)?, d);
            if last.as_deref() == Some(s.as_str()) {
                return None;
            }
            last = Some(s.clone());
            Some(s)
        })
        .collect()
}

/// A vertical marker (peak, OOM) whose label goes in the top margin, joined to the plot by a
/// leader line.
#[derive(Clone, Debug)]
pub struct Marker {
    pub x: f64,
    pub text: String,
}

/// Where a marker's label went: its lane (0 = nearest the plot) and its anchor and x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placed {
    pub lane: usize,
    pub x: f64,
    pub anchor: Anchor,
}

/// Whether the vertical line `l` (x1 == x2) passes through `b` or within `gap` of its sides.
fn crosses(b: &Rect, l: &Rect, gap: f64) -> bool {
    b.x1 - gap < l.x1 && l.x1 < b.x2 + gap && b.y1 < l.y2 && l.y1 < b.y2
}

/// Lays marker labels out in lanes above the plot: each label sits beside its own leader, never
/// over another label or another marker's leader, and inside `[left, right]`. Labels are placed
/// first come first served, in the given order unless placing them by x (either way) leaves
/// fewer out: two markers a few units apart fit one above the other only if the one whose
/// label reaches over the other's leader goes higher. A label that finds no room in `lanes`
/// lanes is left out (`None`); its marker is still drawn, with a tooltip.
pub fn place_markers(
    markers: &[Marker],
    size: f64,
    lane_h: f64,
    lanes: usize,
    left: f64,
    right: f64,
) -> Vec<Option<Placed>> {
    let given: Vec<usize> = (0..markers.len()).collect();
    let mut by_x = given.clone();
    by_x.sort_by(|&a, &b| markers[a].x.total_cmp(&markers[b].x));
    let mut best = greedy(markers, &given, size, lane_h, lanes, left, right);
    for order in [by_x.clone(), by_x.into_iter().rev().collect()] {
        let got = greedy(markers, &order, size, lane_h, lanes, left, right);
        let count = |v: &[Option<Placed>]| v.iter().flatten().count();
        if count(&got) > count(&best) {
            best = got;
        }
    }
    best
}

/// One greedy pass of [`place_markers`] in `order`; the result is in the markers' order.
fn greedy(
    markers: &[Marker],
    order: &[usize],
    size: f64,
    lane_h: f64,
    lanes: usize,
    left: f64,
    right: f64,
) -> Vec<Option<Placed>> {
    // Lane k spans y in [-(k + 1) * lane_h, -k * lane_h]; the plot's top edge is y = 0.
    let lane_box = |k: usize, x1: f64, x2: f64| Rect {
        x1,
        y1: -((k + 1) as f64) * lane_h,
        x2,
        y2: -(k as f64) * lane_h,
    };
    let mut placed: Vec<(usize, Rect, Placed)> = Vec::new();
    let mut out = vec![None; markers.len()];
    for &i in order {
        let m = &markers[i];
        let w = text_width(&m.text, size);
        let sides = if m.x > (left + right) / 2.0 {
            [Anchor::End, Anchor::Start]
        } else {
            [Anchor::Start, Anchor::End]
        };
        let mut got = None;
        'lanes: for k in 0..lanes {
            for side in sides {
                let (x1, tx) = match side {
                    Anchor::End => (m.x - 4.0 - w, m.x - 4.0),
                    _ => (m.x + 4.0, m.x + 4.0),
                };
                let b = lane_box(k, x1, x1 + w);
                if b.x1 < left || b.x2 > right {
                    continue;
                }
                // Its own leader runs from the plot up through lanes 0..=k.
                let own = lane_box(k, m.x, m.x);
                let own = Rect { y2: 0.0, ..own };
                let clear = placed.iter().all(|(j, pb, p)| {
                    let theirs = Rect {
                        x1: markers[*j].x,
                        x2: markers[*j].x,
                        y1: -((p.lane + 1) as f64) * lane_h,
                        y2: 0.0,
                    };
                    !b.hits(pb, 3.0) && !crosses(&b, &theirs, 2.0) && !crosses(pb, &own, 1.0)
                });
                if clear {
                    got = Some((
                        b,
                        Placed {
                            lane: k,
                            x: tx,
                            anchor: side,
                        },
                    ));
                    break 'lanes;
                }
            }
        }
        if let Some((b, p)) = got {
            placed.push((i, b, p));
            out[i] = Some(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ticks_are_round_and_cover_the_max() {
        let mib = 1u64 << 20;
        assert_eq!(byte_ticks(138 * mib), (32 * mib, 160 * mib));
        let (s, top) = byte_ticks(1560 * mib);
        assert_eq!(s, 256 * mib);
        assert_eq!(top, 1792 * mib);
        assert_eq!(tick_bytes(1792 * mib), "1.75 GiB");
        assert_eq!(tick_bytes(512 * mib), "512 MiB");
        assert_eq!(tick_bytes(0), "0");
    }

    #[test]
    fn event_ticks_are_round() {
        assert_eq!(
            event_ticks(3667, 8),
            (0..3667).step_by(500).collect::<Vec<_>>()
        );
        assert_eq!(event_ticks(1, 8), vec![0]);
        assert_eq!(event_ticks(11, 8), vec![0, 2, 4, 6, 8, 10]);
    }

    #[test]
    fn time_labels_get_the_decimals_that_tell_them_apart() {
        let t = [
            Some(0),
            Some(3_662_313),
            Some(3_663_957),
            None,
            Some(3_663_957),
        ];
        let l = time_labels(&t);
        assert_eq!(
            l,
            vec![
                Some("0.000 s".into()),
                Some("3.662 s".into()),
                Some("3.664 s".into()),
                None,
                None
            ]
        );
    }

    #[test]
    fn markers_at_one_place_take_two_lanes() {
        let m = [
            Marker {
                x: 990.0,
                text: "OOM 16 MiB (event 3654)".into(),
            },
            Marker {
                x: 989.7,
                text: "peak 1.5 GiB (event 3653)".into(),
            },
        ];
        let p = place_markers(&m, 11.0, 15.0, 3, 0.0, 1000.0);
        assert_eq!(p[0].unwrap().lane, 0);
        assert_eq!(p[1].unwrap().lane, 1);
        assert_eq!(p[1].unwrap().anchor, Anchor::End);
        // The peak 4 units left of the OOM: its leader would cross the OOM's label in lane 0,
        // so the OOM's label goes up a lane instead.
        let m = [
            Marker {
                x: 884.0,
                text: "OOM 5.0 MiB (event 3273)".into(),
            },
            Marker {
                x: 879.9,
                text: "peak 1.0 GiB (event 3272)".into(),
            },
        ];
        let p = place_markers(&m, 12.0, 16.0, 3, 2.0, 898.0);
        assert_eq!(p[1].unwrap().lane, 0);
        assert_eq!(p[0].unwrap().lane, 1);
    }
}
