//! A cap on glibc's malloc arenas, set once when the binary starts (issue #43).
//!
//! Why: glibc gives a thread that finds its malloc arena locked a new arena, up to eight per
//! core, and reserves 64 MiB of address space for each. With memscope's threads (the trace
//! reader's workers, the analysis' passes side by side: [`crate::threads`]) that address space
//! is reserved though hardly used, and under `prlimit --as` it is what ends a run: on the
//! 16-core GPU host a 90 MB trace with 16 threads aborted ("memory allocation … failed")
//! under 500 and 700 MB with glibc's default, and under 500 MB with 8 arenas, and passed
//! under 500 MB with 4 or 2 (peak RSS about 149 MB in each case). On the 9.2 GB trace on 16
//! cores, 4 arenas took 6.91 and 8.66 s against 7.24 and 7.96 s with the default (that
//! host's noise; BENCHMARKS.md, session 14). A user's own `MALLOC_ARENA_MAX` is left as it is.
//!
//! Only the binary calls [`cap`]: a program that links the library keeps its own allocator
//! settings.

/// The arenas memscope asks glibc for, where the user did not choose.
pub const CAP: i32 = 4;

/// The environment variable glibc reads for the same setting.
pub const VAR: &str = "MALLOC_ARENA_MAX";

/// Whether memscope sets the cap: only where the user has not set [`VAR`].
pub fn wanted(user_setting: Option<&std::ffi::OsStr>) -> bool {
    user_setting.is_none()
}

/// Caps glibc's arenas at [`CAP`] unless `MALLOC_ARENA_MAX` is set. Call before any thread
/// starts. Returns whether the cap was set (false elsewhere than glibc, or where the user chose).
pub fn cap() -> bool {
    if !wanted(std::env::var_os(VAR).as_deref()) {
        return false;
    }
    set()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set() -> bool {
    // SAFETY: mallopt only changes a malloc parameter; it is called before other threads exist.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, CAP) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_setting_is_kept() {
        assert!(wanted(None));
        assert!(!wanted(Some(std::ffi::OsStr::new("16"))));
        assert!(!wanted(Some(std::ffi::OsStr::new(""))));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_cap() {
        assert!(set());
    }
}
