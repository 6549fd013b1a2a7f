//! Series and fits: the window of steady growth in a per-step series, and the robust slope and
//! straightness (Theil-Sen, r²) that decide whether a rise is a leak or noise.

#[allow(unused_imports)]
use super::*;

/// A window of boundaries `[start, end]` over which a series grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start: usize,
    pub end: usize,
    pub rising: usize,
}

/// The window of steady growth with the largest rise: runs without a decrease, trimmed to
/// their first and last rise, that rise at [`MIN_RISING_STEPS`] boundaries or more, and at
/// [`MIN_RISING_SHARE`] of them.
pub fn growth_window(v: &[u64]) -> Option<Window> {
    growth_window_min(v, MIN_RISING_STEPS)
}

/// [`growth_window`] with another least number of rising boundaries.
pub fn growth_window_min(v: &[u64], min_rising: usize) -> Option<Window> {
    let mut best: Option<(u64, Window)> = None;
    let mut a = 0;
    while a + 1 < v.len() {
        // The run [a, b]: no decrease.
        let mut b = a;
        while b + 1 < v.len() && v[b + 1] >= v[b] {
            b += 1;
        }
        let first_rise = (a..b).find(|&i| v[i + 1] > v[i]);
        let last_rise = (a..b).rev().find(|&i| v[i + 1] > v[i]);
        if let (Some(mut s), Some(l)) = (first_rise, last_rise) {
            let e = l + 1;
            // Warm-up: up to two first rises far above the typical one (workspaces, the
            // optimizer's first state) are not the leak's.
            let mut rises: Vec<u64> = (s..e).map(|i| v[i + 1] - v[i]).filter(|&d| d > 0).collect();
            rises.sort_unstable();
            let typical = rises.get(rises.len() / 2).copied().unwrap_or(0);
            let mut trimmed = 0;
            while trimmed < 2 && s + 1 < e && v[s + 1] - v[s] > 3 * typical {
                s += 1;
                trimmed += 1;
            }
            let rising = (s..e).filter(|&i| v[i + 1] > v[i]).count();
            let share = rising as f64 / (e - s) as f64;
            if rising >= min_rising && share >= MIN_RISING_SHARE {
                let rise = v[e] - v[s];
                if best.is_none_or(|(r, _)| rise >= r) {
                    best = Some((
                        rise,
                        Window {
                            start: s,
                            end: e,
                            rising,
                        },
                    ));
                }
            }
        }
        a = b.max(a + 1);
    }
    best.map(|(_, w)| w)
}

/// Theil-Sen slope of `v` against its index: the median of pairwise slopes, robust to a
/// few odd steps. Long series use the pairs `(i, i + n/2)` only, which keeps it linear.
pub fn theil_sen(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return 0.0;
    }
    let mut slopes: Vec<f64> = Vec::new();
    if n <= 200 {
        for i in 0..n {
            for j in i + 1..n {
                slopes.push((v[j] - v[i]) / (j - i) as f64);
            }
        }
    } else {
        let h = n / 2;
        for i in 0..n - h {
            slopes.push((v[i + h] - v[i]) / h as f64);
        }
    }
    slopes.sort_by(|a, b| a.total_cmp(b));
    let m = slopes.len();
    if m % 2 == 1 {
        slopes[m / 2]
    } else {
        (slopes[m / 2 - 1] + slopes[m / 2]) / 2.0
    }
}

/// R² of the least-squares line through `v` against its index (1 for a constant series).
pub fn r_squared(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 3 {
        return 1.0;
    }
    let mx = (n - 1.0) / 2.0;
    let my = v.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, &y) in v.iter().enumerate() {
        let dx = i as f64 - mx;
        let dy = y - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if syy == 0.0 {
        return 1.0;
    }
    (sxy * sxy) / (sxx * syy)
}
