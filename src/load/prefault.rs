//! Fresh memory faulted in on the second core, ahead of the decoder.
//!
//! Decoding a gigabyte snapshot fills about a gigabyte of new memory front to back (the pickle
//! arena and memo, the events). Each first touch of a 4 KiB page stops the decoding thread for
//! a fault and the kernel's zeroing of the page: `perf` put that at an eighth of the decode.
//! The buffers are reserved up front, so their addresses are known: a helper thread asks the
//! kernel to fault in (`MADV_POPULATE_WRITE`) the next few MiB past each buffer's current length
//! while the decoder works, and the decoder then writes into pages that are already there.
//! Only a bounded window past what is used is populated, so resident memory does not grow by
//! the reservations' slack. The advice never reads or writes the memory, so it is harmless even
//! if a buffer has moved since it was published (a kernel without it returns an error, ignored).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How far past a buffer's length the helper keeps pages faulted in.
pub const AHEAD: usize = 8 << 20;

/// Buffers the decoder publishes: where each lives, its capacity and length, in bytes.
#[derive(Default)]
pub struct Regions {
    slots: [Slot; 4],
}

#[derive(Default)]
struct Slot {
    base: AtomicUsize,
    cap: AtomicUsize,
    len: AtomicUsize,
}

impl Regions {
    /// Publishes buffer `i` (0..4): its current address, capacity and length.
    pub fn publish<T>(&self, i: usize, v: &Vec<T>) {
        if let Some(s) = self.slots.get(i) {
            let size = std::mem::size_of::<T>();
            s.base.store(v.as_ptr() as usize, Ordering::Relaxed);
            s.cap.store(v.capacity() * size, Ordering::Relaxed);
            s.len.store(v.len() * size, Ordering::Relaxed);
        }
    }
}

/// Populates each published buffer up to `AHEAD` bytes past its length until `done`.
pub fn run(regions: &Regions, done: &AtomicBool) {
    const PAGE: usize = 4096;
    // Per slot: the base it was populated for, and how far.
    let mut upto = [(0usize, 0usize); 4];
    while !done.load(Ordering::Relaxed) {
        let mut worked = false;
        for (s, u) in regions.slots.iter().zip(upto.iter_mut()) {
            let base = s.base.load(Ordering::Relaxed);
            let cap = s.cap.load(Ordering::Relaxed);
            let len = s.len.load(Ordering::Relaxed);
            if base == 0 || cap == 0 {
                continue;
            }
            if u.0 != base {
                *u = (base, base + len);
            }
            let from = (u.1.max(base + len) + PAGE - 1) & !(PAGE - 1);
            let to = (base + cap).min(base + len + AHEAD) & !(PAGE - 1);
            if to > from {
                advise(from, to - from);
                u.1 = to;
                worked = true;
            }
        }
        if !worked {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

#[cfg(target_os = "linux")]
fn advise(addr: usize, len: usize) {
    // SAFETY: MADV_POPULATE_WRITE faults in page tables for the range and performs no access to
    // the memory itself: contents are unchanged, concurrent writers are unaffected. An address
    // that is no longer mapped makes the call fail with an error, which is ignored.
    unsafe {
        libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_addr: usize, _len: usize) {}
