//! What memscope undoes when a signal ends it (SIGTERM, SIGHUP, SIGQUIT, SIGINT): a killed
//! memscope must not leave a terminal in the alternate screen with mouse tracking on, the
//! cursor hidden and raw mode set, a half-written `-o` temporary file, or the program of
//! `memscope run` orphaned.
//!
//! One handler serves all four signals; it only does what is async-signal-safe (`write`,
//! `tcsetattr`, `unlink`, `kill`, `raise`) over state published beforehand in atomics:
//!
//! - while `memscope run` waits for its program, the signal is passed on to the program's
//!   process group and memscope keeps waiting (it then cleans up and reports as usual);
//! - otherwise the terminal is restored (when the TUI holds it), registered temporary files
//!   are removed, and the signal is raised again with its default action, so the exit status
//!   still says which signal ended memscope.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The signals that end memscope, and that it cleans up after.
pub const FATAL: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGINT];

/// What undoes the TUI's terminal modes: mouse tracking off (every mode crossterm turns on),
/// the alternate screen left, the cursor shown.
const TERMINAL_RESET: &[u8] =
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?1049l\x1b[?25h";

static TERMINAL_HELD: AtomicBool = AtomicBool::new(false);
static SAVED_TERMIOS: OnceLock<libc::termios> = OnceLock::new();
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);
/// While not null, SIGINT stores `true` here instead of ending memscope (the query prompt).
static INTERRUPT: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
const SLOTS: usize = 16;
static TEMPS: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

extern "C" fn on_signal(sig: libc::c_int) {
    let flag = INTERRUPT.load(Ordering::SeqCst);
    if sig == libc::SIGINT && !flag.is_null() {
        // SAFETY: the flag is kept alive by the InterruptRegistration that stored it.
        unsafe { (*flag).store(true, Ordering::SeqCst) };
        return;
    }
    let group = CHILD_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        // SAFETY: kill is async-signal-safe; the group is the program's own.
        unsafe { libc::kill(-group, sig) };
        return;
    }
    restore_terminal();
    for slot in &TEMPS {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a NUL-terminated path owned by the slot until unregistered.
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: back to the default action, then the same signal again: memscope ends as the
    // signal says (exit status 128+N in a shell).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handler for [`FATAL`]. Called once, at the start of the binary. A signal that
/// was ignored when memscope started (`nohup`, a shell's background job) stays ignored.
pub fn install() {
    for sig in FATAL {
        // SAFETY: sigaction with a handler that only makes async-signal-safe calls.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Writes the terminal reset and puts back the terminal modes saved by [`hold_terminal`], if
/// the TUI holds the terminal. Async-signal-safe.
fn restore_terminal() {
    if !TERMINAL_HELD.swap(false, Ordering::SeqCst) {
        return;
    }
    // SAFETY: write and tcsetattr are async-signal-safe; the termios was saved before use.
    unsafe {
        libc::write(1, TERMINAL_RESET.as_ptr().cast(), TERMINAL_RESET.len());
        if let Some(t) = SAVED_TERMIOS.get() {
            libc::tcsetattr(0, libc::TCSANOW, t);
        }
    }
}

/// Called by the TUI before it sets raw mode: saves the terminal's modes, so that a signal
/// can put them back.
pub fn save_terminal_modes() {
    // SAFETY: tcgetattr fills the struct; on failure nothing is saved.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut t) == 0 {
            let _ = SAVED_TERMIOS.set(t);
        }
    }
}

/// Whether the TUI holds the terminal (alternate screen, raw mode, mouse tracking).
pub fn hold_terminal(held: bool) {
    TERMINAL_HELD.store(held, Ordering::SeqCst);
}

/// While set (a process group id above 0), the four signals are passed on to that group
/// instead of ending memscope. 0 clears it.
pub fn forward_to_group(pgid: i32) {
    CHILD_GROUP.store(pgid, Ordering::SeqCst);
}

/// While held, SIGINT (Ctrl-C) sets `flag` instead of ending memscope: the query prompt's
/// Ctrl-C cancels the running statement ([`crate::query::Cancel`]) and the session, with its
/// history, goes on. Dropping it gives SIGINT back its usual meaning.
pub struct InterruptRegistration(std::sync::Arc<AtomicBool>);

/// Routes SIGINT to `flag` until the registration is dropped.
pub fn interrupt_to(flag: std::sync::Arc<AtomicBool>) -> InterruptRegistration {
    INTERRUPT.store(std::sync::Arc::as_ptr(&flag).cast_mut(), Ordering::SeqCst);
    InterruptRegistration(flag)
}

impl Drop for InterruptRegistration {
    fn drop(&mut self) {
        let _ = INTERRUPT.compare_exchange(
            std::sync::Arc::as_ptr(&self.0).cast_mut(),
            std::ptr::null_mut(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

/// A temporary file removed if a signal ends memscope; unregistered when dropped.
pub struct TempRegistration(Option<usize>);

/// Registers `path` for removal on a signal (at most 16 at once; past that it is not).
pub fn register_temp(path: &std::path::Path) -> TempRegistration {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return TempRegistration(None);
    };
    let p = c.into_raw();
    for (i, slot) in TEMPS.iter().enumerate() {
        if slot
            .compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return TempRegistration(Some(i));
        }
    }
    // SAFETY: p came from into_raw above and was not stored.
    drop(unsafe { CString::from_raw(p) });
    TempRegistration(None)
}

impl Drop for TempRegistration {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let p = TEMPS[i].swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: p came from CString::into_raw in register_temp.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}
