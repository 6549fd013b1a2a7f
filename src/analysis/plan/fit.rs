//! Two captures of one program at two batch sizes (or two sequence lengths): each request's
//! two sizes give its term exactly, where one capture can only infer it.
//!
//! The same program makes the same requests in the same order at any batch size, from the same
//! lines. A request is matched to the other capture's by its stack (file, line and function of
//! every frame, compared as text, since the two files intern them apart) and its rank among the
//! requests of that stack: the k-th request of a stack here is the k-th there. Stacks that
//! allocate a different number of times in the two captures (a log of more steps, a ring
//! buffer that dropped entries) still match their first requests; the rest keep what one
//! capture inferred.

use rustc_hash::FxHashMap as HashMap;

use super::{Basis, Fit, Growth, Request, Shape, Term};
use crate::model::{Action, Device, FrameKind, Snapshot, StackId};

/// How far ahead the alignment looks for a request's counterpart past requests that one side
/// made and the other did not (an op that takes another path at another size).
const WINDOW: usize = 64;

/// Which frames a matching key holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tier {
    /// Python frames by file, line and function; native frames by function alone (their
    /// `line` is an offset into a library, and `??` frames are raw addresses that move with
    /// the process's layout), so C++ stacks of one build match across processes.
    Full,
    /// Python frames alone: matches a capture recorded with C++ frames against one without,
    /// a stack cut at another depth, and an op whose native path changed with the size (an
    /// attention backend picked by shape). Requests with no Python frame (the autograd
    /// engine's thread) share the empty key and are aligned call by call in log order.
    Python,
}

/// A request's event in another capture, and whether only its Python frames matched it.
type Counterpart = Option<(usize, bool)>;

/// Per request of `dev` (by event), the same request's event in `other_dev` and whether
/// the second tier found it: the requests of each key aligned in log order, a pair kept where
/// `compatible` accepts the request here (by event) and its two sizes; the second tier only
/// sees what the first left.
fn matches(
    snap: &Snapshot,
    dev: &Device,
    osnap: &Snapshot,
    odev: &Device,
    compatible: &dyn Fn(usize, u64, u64) -> bool,
) -> Vec<Counterpart> {
    let mut found = vec![None; dev.events.len()];
    let mut taken = vec![false; odev.events.len()];
    for tier in [Tier::Full, Tier::Python] {
        let by_key = |snap: &Snapshot, dev: &Device, skip: &dyn Fn(usize) -> bool| {
            let mut keys: HashMap<StackId, String> = HashMap::default();
            let mut out: HashMap<String, Vec<usize>> = HashMap::default();
            for (i, e) in dev.events.iter().enumerate() {
                if e.action == Action::Alloc && !skip(i) {
                    let k = keys
                        .entry(e.stack)
                        .or_insert_with(|| key(snap, e.stack, tier));
                    out.entry(k.clone()).or_default().push(i);
                }
            }
            out
        };
        let here = by_key(snap, dev, &|i| found[i].is_some());
        let there = by_key(osnap, odev, &|j| taken[j]);
        let mut pairs = Vec::new();
        for (k, xs) in &here {
            if let Some(ys) = there.get(k) {
                let ok = |a: usize, b: usize| {
                    compatible(xs[a], dev.events[xs[a]].size, odev.events[ys[b]].size)
                };
                for (a, b) in align(xs.len(), ys.len(), &ok) {
                    pairs.push((xs[a], ys[b]));
                }
            }
        }
        for (i, j) in pairs {
            found[i] = Some((j, tier == Tier::Python));
            taken[j] = true;
        }
    }
    found
}

/// Pairs `nx` items here with `ny` there, both in order (the requests of one key, the blocks
/// of one key alive before recording): `compatible(a, b)` says whether item `a` here and `b`
/// there can be the same; an item with no counterpart near is skipped.
pub(super) fn align(
    nx: usize,
    ny: usize,
    compatible: &dyn Fn(usize, usize) -> bool,
) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < nx && j < ny {
        if compatible(i, j) {
            pairs.push((i, j));
            i += 1;
            j += 1;
            continue;
        }
        // A request the other side made and this one did not, or the reverse.
        let skip_there = (1..WINDOW)
            .take_while(|d| j + d < ny)
            .find(|d| compatible(i, j + d));
        let skip_here = (1..WINDOW)
            .take_while(|d| i + d < nx)
            .find(|d| compatible(i + d, j));
        match (skip_there, skip_here) {
            (Some(d), Some(e)) if e < d => i += e,
            (Some(d), _) => j += d,
            (None, Some(e)) => i += e,
            // Neither has a counterpart near: the pair is the same request at sizes no term
            // explains (a workspace sized by the algorithm picked); it keeps what one capture
            // inferred.
            (None, None) => {
                i += 1;
                j += 1;
            }
        }
    }
    pairs
}

/// A stack as text, by `tier`: its frames (the model's [`FrameKind`] tells native from Python).
pub(super) fn key(snap: &Snapshot, s: StackId, tier: Tier) -> String {
    let st = &snap.stacks;
    let mut out = String::new();
    for &f in st.frames(s) {
        let f = st.frame(f);
        let name = st.str(f.name);
        if f.kind == FrameKind::Native {
            if tier == Tier::Python || name == "??" {
                continue;
            }
            out.push_str("native:");
            out.push_str(name);
        } else {
            out.push_str(st.str(f.file));
            out.push(':');
            out.push_str(&f.line.to_string());
            out.push(':');
            out.push_str(name);
        }
        out.push('\n');
    }
    out
}

/// The term of one axis from a request's sizes `a` at `x0` and `b` at `x1`, and whether the two
/// points fit none of the exact terms (then an affine term through both).
pub(super) fn term(a: u64, b: u64, x0: u64, x1: u64, quadratic_allowed: bool) -> (Term, bool) {
    let (a128, b128, x0, x1) = (a as u128, b as u128, x0 as u128, x1 as u128);
    if a == b {
        return (Term::Fixed, false);
    }
    if a128 * x1 == b128 * x0 {
        return (Term::Linear, false);
    }
    if quadratic_allowed && a128 * x1 * x1 == b128 * x0 * x0 {
        return (Term::Quadratic, false);
    }
    let per_unit = (b as f64 - a as f64) / (x1 as f64 - x0 as f64);
    let base = a as f64 - per_unit * x0 as f64;
    (Term::Affine { base, per_unit }, true)
}

/// Another capture of the program, on the device that pairs with this one's.
pub struct Capture<'a> {
    pub snap: &'a Snapshot,
    pub dev: &'a Device,
    pub shape: Shape,
}

/// The term of a request of `a` bytes at `x0` from its sizes in the other captures (`pts`:
/// axis value, size). One point: the exact term through the two. More: the term through the
/// farthest point where it also gives every other point; where it does not (a kernel whose
/// requests change with the size), the line through the two points of largest axis value,
/// which are the nearest to sizes above the captures.
pub(super) fn term_from(a: u64, x0: u64, pts: &[(u64, u64)], quadratic: bool) -> Term {
    let far = pts
        .iter()
        .copied()
        .max_by_key(|&(x, _)| x.abs_diff(x0))
        .unwrap_or((x0, a));
    let (t, _) = term(a, far.1, x0, far.0, quadratic);
    if pts.iter().all(|&(x, b)| t.scale(a, x0, x).abs_diff(b) <= 1) {
        return t;
    }
    let mut all: Vec<(u64, u64)> = pts.to_vec();
    all.push((x0, a));
    all.sort_unstable();
    let (xa, sa) = all[all.len() - 2];
    let (xb, sb) = all[all.len() - 1];
    let per_unit = (sb as f64 - sa as f64) / (xb as f64 - xa as f64);
    Term::Affine {
        base: sb as f64 - per_unit * xb as f64,
        per_unit,
    }
}

/// Per other capture, per event of the first capture's log: the event of the same request
/// there, where the fit paired them.
pub type Pairing = Vec<Vec<Option<usize>>>;

/// Replaces the inferred terms of every matched request with the ones fitted from all the
/// other captures (which vary one axis, the same for all); returns how the requests were
/// paired, for the layout before recording ([`super::prelog`]).
pub fn refine(
    snap: &Snapshot,
    dev: &Device,
    others: &[Capture],
    rec: Shape,
    reqs: &mut [Option<Request>],
) -> (Fit, Pairing) {
    let flash = super::classify::flash_attention(&snap.stacks);
    let other = others[0].shape;
    let batch_axis = other.batch != rec.batch;
    let axis = |s: Shape| {
        if batch_axis {
            s.batch
        } else {
            s.seq.unwrap_or(1)
        }
    };
    let x0 = axis(rec);
    let elastic: Vec<bool> = reqs.iter().map(|r| r.is_some_and(|r| r.elastic)).collect();
    let recurrent: Vec<bool> = reqs
        .iter()
        .map(|r| r.is_some_and(|r| r.recurrent))
        .collect();
    // Quadratic only on the sequence axis, and not where the attention is flash or
    // memory-efficient (linear in the sequence): there a request that quadrupled from S to 2S
    // is a mismatch of two equal-sized requests, not attention scores.
    let quadratic = !batch_axis && !flash;
    let found: Vec<(u64, &Device, Vec<Counterpart>)> = others
        .iter()
        .map(|o| {
            let x1 = axis(o.shape);
            // A convolution's workspace is sized by the algorithm cuDNN picks for the shape:
            // its two sizes need fit no exact term (fixtures/plan/cudnn39, vgg_fp32: a backward
            // workspace of 20.3 MiB at b16, 54.8 at b32, 89.3 at b64, 158.3 at b128). Left
            // unpaired it kept the one-capture reading, and the reserved peak at b128 came out
            // 24% under. Paired by stack and order like any request, it is carried as the
            // workspace band ([`Request::varies`]).
            // A recurrent module's workspace likewise ([`Request::recurrent`]), here or
            // equal: cuDNN's RNN workspace stops growing past some shape.
            let compatible = |i: usize, a: u64, b: u64| {
                let (_, odd) = term(a, b, x0, x1, quadratic);
                !odd || (elastic[i] && a != b && (b > a) == (x1 > x0))
                    || (recurrent[i] && (a == b || (b > a) == (x1 > x0)))
            };
            (x1, o.dev, matches(snap, dev, o.snap, o.dev, &compatible))
        })
        .collect();
    let (mut matched, mut by_python) = (0, 0);
    let mut pts = Vec::with_capacity(others.len());
    for (i, r) in reqs.iter_mut().enumerate() {
        let Some(r) = r.as_mut() else {
            continue;
        };
        pts.clear();
        let mut python = false;
        for (x1, odev, m) in &found {
            if let Some((j, p)) = m[i] {
                pts.push((*x1, odev.events[j].size));
                python |= p;
            }
        }
        if pts.is_empty() {
            continue;
        }
        matched += 1;
        by_python += usize::from(python);
        let t = term_from(r.size, x0, &pts, quadratic);
        let g = if batch_axis {
            // The sequence term stays inferred, for a request that grows at all.
            let seq = if t == Term::Fixed {
                Term::Fixed
            } else {
                r.central.seq
            };
            Growth { batch: t, seq }
        } else {
            Growth {
                batch: r.central.batch,
                seq: t,
            }
        };
        if elastic[i] && matches!(t, Term::Affine { .. }) {
            // Two points of an algorithm's choice are no law for a third shape: the likelier
            // reading keeps what one capture inferred, the upper one takes the line through
            // the sizes (the larger of the two, [`Request::varies`]).
            r.upper = g;
            r.varies = true;
            continue;
        }
        r.central = g;
        r.upper = g;
        r.basis = if t == Term::Fixed {
            Basis::MatchedSame
        } else {
            Basis::MatchedFitted
        };
    }
    let requests = reqs.iter().flatten().count();
    let pairing = found
        .into_iter()
        .map(|(_, _, m)| m.into_iter().map(|c| c.map(|(j, _)| j)).collect())
        .collect();
    let fit = Fit::TwoCaptures {
        other,
        more: others[1..].iter().map(|o| o.shape).collect(),
        matched,
        by_python_stack: by_python,
        requests,
        unmatched: requests - matched,
    };
    (fit, pairing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sizes_give_the_term() {
        assert_eq!(term(4096, 4096, 8, 16, false), (Term::Fixed, false));
        assert_eq!(term(4096, 8192, 8, 16, false), (Term::Linear, false));
        assert_eq!(term(4096, 16384, 256, 512, true), (Term::Quadratic, false));
        // Quadratic is only a sequence term: on the batch axis the same sizes are affine.
        assert!(term(4096, 16384, 8, 16, false).1);
        let (t, odd) = term(1000, 1800, 8, 16, false);
        assert!(odd);
        // 200 + 100 × batch: exact at both points and between.
        assert_eq!(t.scale(1000, 8, 12), 1400);
        assert_eq!(t.scale(1000, 8, 16), 1800);
    }

    #[test]
    fn three_sizes_give_the_term_that_holds_at_all_or_the_line_nearest_above() {
        // Linear through all three: the exact term.
        assert_eq!(
            term_from(1000, 2, &[(4, 2000), (12, 6000)], false),
            Term::Linear
        );
        assert_eq!(
            term_from(1000, 2, &[(4, 1000), (12, 1000)], false),
            Term::Fixed
        );
        // Proportional from 2 to 4, not at 12 (a kernel that changed its request): the line
        // through 4 and 12.
        let t = term_from(1000, 2, &[(4, 2000), (12, 9000)], false);
        assert!(matches!(t, Term::Affine { .. }));
        assert_eq!(t.scale(1000, 2, 12), 9000);
        assert_eq!(t.scale(1000, 2, 4), 2000);
        assert_eq!(t.scale(1000, 2, 20), 16000);
    }

    #[test]
    fn terms_scale_sizes() {
        assert_eq!(Term::Fixed.scale(1000, 4, 32), 1000);
        assert_eq!(Term::Linear.scale(1000, 4, 32), 8000);
        assert_eq!(Term::Quadratic.scale(1000, 256, 512), 4000);
        assert_eq!(Term::Linear.scale(1000, 4, 4), 1000);
    }
}
