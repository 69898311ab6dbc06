//! Settings of mimalloc, the global allocator of the binaries (see README "Performance").

/// mimalloc's `mi_option_purge_delay`: its position in `mi_option_e` of the mimalloc v3 that
/// `libmimalloc-sys` builds (checked by `the_purge_delay_option_is_the_one_set`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The environment variable through which mimalloc reads its purge delay.
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// Returns memory freed to mimalloc to the OS at once instead of after its default delay of
/// 1 s, unless `MIMALLOC_PURGE_DELAY` sets the delay. A replica frees ~600 MiB after decoding a
/// full sync of 5,000 nodes and 150,000 pods; mimalloc purges only when the thread that freed it
/// allocates again past the delay, so an idle replica kept 211–228 MiB resident instead of
/// 145–184 MiB. Call it first in `main`, before any other thread starts (mimalloc's options are
/// not thread safe).
pub fn purge_freed_memory_at_once() {
    if std::env::var_os(PURGE_DELAY_ENV).is_none() {
        set_purge_delay_ms(0);
    }
}

/// The purge delay in milliseconds now in force.
// `c_long` is 32 bits on some targets.
#[allow(clippy::useless_conversion)]
pub fn purge_delay_ms() -> i64 {
    // SAFETY: reads one option; the index is mimalloc's purge delay (see the test).
    i64::from(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) })
}

fn set_purge_delay_ms(ms: i64) {
    let value = libc::c_long::try_from(ms).unwrap_or(0);
    // SAFETY: sets one option; callers run before other threads exist (or, in the test, own the
    // option).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index names mimalloc's purge delay: its documented default (1,000 ms in mimalloc v3)
    /// is what the index reads, and setting through it changes that same option.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os(PURGE_DELAY_ENV).is_none() {
            assert_eq!(purge_delay_ms(), 1000, "mimalloc v3's default purge delay");
        }
        set_purge_delay_ms(7);
        assert_eq!(purge_delay_ms(), 7);
        purge_freed_memory_at_once();
        if std::env::var_os(PURGE_DELAY_ENV).is_none() {
            assert_eq!(purge_delay_ms(), 0);
        }
    }
}
