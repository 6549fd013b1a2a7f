//! Turns a SIGBUS from a mapped input that shrank under the reader into an error message.
//!
//! Inputs are memory-mapped (see [`super::input`]); if another process truncates the file
//! while memscope reads it (a training job re-dumping its snapshot), touching a page past the
//! new end raises SIGBUS, which would kill memscope with no word. Each live map is registered
//! here with a message naming its file; the handler, if the faulting address lies in one,
//! writes that message and exits with status 2. A fault anywhere else gets the default action.
//! The handler only reads atomics and calls `write`, `_exit` and `sigaction`, all
//! async-signal-safe.

use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

const SLOTS: usize = 256;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    msg: AtomicPtr<u8>,
    msg_len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    msg: AtomicPtr::new(std::ptr::null_mut()),
    msg_len: AtomicUsize::new(0),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();

/// A registered map; dropping it (with the map) unregisters it.
pub struct Registration {
    slot: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let s = &TABLE[self.slot];
        s.len.store(0, Ordering::SeqCst);
        let msg = s.msg.swap(std::ptr::null_mut(), Ordering::SeqCst);
        let n = s.msg_len.load(Ordering::SeqCst);
        s.start.store(0, Ordering::SeqCst);
        if !msg.is_null() {
            // SAFETY: made by `Box::into_raw` of a boxed slice of `n` bytes in `register`.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(msg, n)) });
        }
    }
}

/// The message the handler prints for a map of `path`.
pub fn message(path: &Path) -> String {
    format!(
        "memscope: error: {}: the file changed while it was read (it was cut short under the reader: copy it first, or wait until its writer is done)\n",
        path.display()
    )
}

/// Registers a map of `path`; `None` if the table is full (the map then has no guard).
pub fn register(map: &[u8], path: &Path) -> Option<Registration> {
    INSTALL.call_once(install);
    let msg: Box<[u8]> = message(path).into_bytes().into_boxed_slice();
    let n = msg.len();
    for (i, s) in TABLE.iter().enumerate() {
        if s.start
            .compare_exchange(0, map.as_ptr() as usize, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            s.msg_len.store(n, Ordering::SeqCst);
            s.msg.store(Box::into_raw(msg) as *mut u8, Ordering::SeqCst);
            s.len.store(map.len(), Ordering::SeqCst);
            return Some(Registration { slot: i });
        }
    }
    None
}

/// The action SIGBUS had before (Rust's runtime installs one for stack overflows): faults
/// that are not in a registered map go back to it.
static OLD: std::sync::OnceLock<libc::sigaction> = std::sync::OnceLock::new();

fn install() {
    // SAFETY: sigaction with a handler that only uses async-signal-safe calls.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &sa, &mut old) == 0 {
            let _ = OLD.set(old);
        }
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in TABLE.iter() {
        let start = s.start.load(Ordering::SeqCst);
        let len = s.len.load(Ordering::SeqCst);
        if start != 0 && addr >= start && addr < start.saturating_add(len) {
            let msg = s.msg.load(Ordering::SeqCst);
            let n = s.msg_len.load(Ordering::SeqCst);
            if !msg.is_null() {
                // SAFETY: write(2) and _exit(2) are async-signal-safe; the message lives
                // until its registration is dropped, which cannot happen during the fault.
                unsafe { libc::write(2, msg as *const libc::c_void, n) };
            }
            unsafe { libc::_exit(2) };
        }
    }
    // Not one of ours: put the previous action back; returning re-runs the access, which
    // faults again into it (or, by default, kills).
    // SAFETY: sigaction(2) and signal(2) are async-signal-safe.
    unsafe {
        match OLD.get() {
            Some(old) => libc::sigaction(sig, old, std::ptr::null_mut()),
            None => {
                libc::signal(sig, libc::SIG_DFL);
                0
            }
        };
    }
}
