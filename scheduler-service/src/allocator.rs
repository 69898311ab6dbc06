//! Settings of mimalloc, the global allocator of the binaries (see docs/performance.md).

/// One mimalloc option this crate sets: its position in `mi_option_e` of the mimalloc v3 that
/// `libmimalloc-sys` builds (checked by `each_option_index_names_the_option_set`), the environment
/// variable through which mimalloc reads it, mimalloc's default and our value.
#[derive(Debug, Clone, Copy)]
pub struct MiOption {
    /// Index in `mi_option_e`.
    index: libmimalloc_sys::mi_option_t,
    /// The environment variable that sets it; when present it wins over our value.
    pub env: &'static str,
    /// mimalloc v3's default.
    pub default: i64,
    /// What the binaries set.
    pub value: i64,
}

/// The options the binaries set, and why:
/// - `purge_delay` 0: memory freed to mimalloc goes back to the OS at once, not after 1 s (and
///   only when the freeing thread allocates again). A replica frees ~600 MiB after decoding a
///   full sync of 5,000 nodes and 150,000 pods; idle after it, it kept 769 MiB resident, and 211–228
///   MiB after the load, instead of 144 and ~180 MiB.
/// - `arena_eager_commit` 0: arenas are committed as they are used instead of whole. With eager
///   commit (mimalloc's default on Linux, which overcommits) and immediate purging, building the
///   engine benchmark's cluster spent 44 % of its time zeroing freshly faulted pages in the kernel
///   (`clear_page_erms`) and took 2–3 times as long as with glibc malloc; without it, as long.
/// - `allow_thp` 0: no transparent huge pages for the process (mimalloc otherwise marks its
///   arenas `MADV_HUGEPAGE`, so a 2 MiB page stays resident whole while any 4 KiB of it is in
///   use, and khugepaged collapses sparse ranges back into whole ones). A replica that had taken
///   the full Schedule load of `placement-load` kept 195 MiB resident with them (90 MiB of it in
///   huge pages) and 160 MiB without.
pub const OPTIONS: [MiOption; 3] = [
    MiOption {
        index: 15,
        env: "MIMALLOC_PURGE_DELAY",
        default: 1000,
        value: 0,
    },
    MiOption {
        index: 4,
        env: "MIMALLOC_ARENA_EAGER_COMMIT",
        default: 2,
        value: 0,
    },
    MiOption {
        index: 43,
        env: "MIMALLOC_ALLOW_THP",
        default: 1,
        value: 0,
    },
];

/// The `allow_thp` entry of [`OPTIONS`].
const ALLOW_THP: MiOption = OPTIONS[2];

/// Sets [`OPTIONS`], each unless its environment variable is set. Call it first in `main`, before
/// any other thread starts (mimalloc's options are not thread safe).
pub fn configure() {
    for option in OPTIONS {
        if std::env::var_os(option.env).is_none() {
            option.set(option.value);
        }
    }
    if ALLOW_THP.get() == 0 {
        disable_thp();
    }
}

/// [`configure`], with mimalloc's purge delay at `purge_delay_ms` instead of 0 (unless
/// `MIMALLOC_PURGE_DELAY` is set), for a process that frees and reallocates the same amount of
/// memory over and over (see `binder-agent run`). Call it first in `main`, as [`configure`].
pub fn configure_with_purge_delay(purge_delay_ms: i64) {
    configure();
    if std::env::var_os(PURGE_DELAY.env).is_none() {
        PURGE_DELAY.set(purge_delay_ms);
    }
}

/// The `purge_delay` entry of [`OPTIONS`].
pub const PURGE_DELAY: MiOption = OPTIONS[0];

/// Turns transparent huge pages off for this process, as mimalloc does at its start when
/// `MIMALLOC_ALLOW_THP=0` is in the environment: the option set later by [`configure`] only stops
/// mimalloc from asking for them, while the memory it mapped before `main` may have asked already.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes one integer argument and touches no memory of ours; on a
    // kernel without it the call fails with EINVAL and nothing changes.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Whether transparent huge pages are off for this process (`None` where the OS cannot say).
pub fn thp_disabled() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_THP_DISABLE takes no argument and returns 0 or 1 (-1 on error).
        let r = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        (r >= 0).then_some(r == 1)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

impl MiOption {
    /// The value in force.
    // `c_long` is 32 bits on some targets.
    #[allow(clippy::useless_conversion)]
    pub fn get(&self) -> i64 {
        // SAFETY: reads one option by its index in mimalloc's enum (see the test).
        i64::from(unsafe { libmimalloc_sys::mi_option_get(self.index) })
    }

    fn set(&self, value: i64) {
        let value = libc::c_long::try_from(value).unwrap_or(0);
        // SAFETY: sets one option by its index; callers run before other threads exist (or, in
        // the test, own the option).
        unsafe { libmimalloc_sys::mi_option_set(self.index, value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each index names the intended option: it reads that option's documented default in
    /// mimalloc v3, setting through it reads back, and `configure` applies our value.
    #[test]
    fn each_option_index_names_the_option_set() {
        for option in OPTIONS {
            if std::env::var_os(option.env).is_none() {
                assert_eq!(option.get(), option.default, "{}: mimalloc v3's default", option.env);
            }
            option.set(7);
            assert_eq!(option.get(), 7, "{}", option.env);
        }
        configure();
        for option in OPTIONS {
            if std::env::var_os(option.env).is_none() {
                assert_eq!(option.get(), option.value, "{}", option.env);
            }
        }
        configure_with_purge_delay(50);
        if std::env::var_os(PURGE_DELAY.env).is_none() {
            assert_eq!(PURGE_DELAY.get(), 50, "the purge delay asked for");
        }
        if std::env::var_os(ALLOW_THP.env).is_none() && cfg!(target_os = "linux") {
            assert_eq!(thp_disabled(), Some(true), "configure turns transparent huge pages off");
        }
    }
}
