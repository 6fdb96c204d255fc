//! The service's use of glibc's allocator: fixed thresholds for request-sized buffers,
//! and free memory handed back to the kernel after a burst of work.

use std::time::Duration;

/// How often free memory is handed back (see [`hand_back_free_memory`]).
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Keeps glibc's malloc from handing memory back to the kernel after every request.
/// hyper parses each request head into tables sized for [`crate::http::server`]'s
/// header-line limit (two of 128 KiB); at glibc's default, adaptive thresholds every
/// request grew the heap or mapped memory for them and gave it back when freed, paying
/// page faults and trims each time (about a tenth of the CPU of a refused webhook).
/// Fixed thresholds keep buffers of that size in the heap for reuse; free memory above
/// 1 MiB at the top of a heap is still returned to the kernel.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters, and this runs before the runtime
    // starts any thread, so no allocation is in progress elsewhere.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1024 * 1024);
    }
}

/// Every [`TRIM_EVERY`], hands the free pages of every malloc arena back to the kernel.
///
/// glibc gives each busy thread an arena of its own (up to eight per core) and returns
/// only the free memory at the top of a heap; what a burst of requests and runs freed in
/// the middle of the arenas stays resident (after a flood of 3,000 triggers, about a
/// tenth of the service's heap was such pages). `malloc_trim` walks the arenas' free
/// chunks on a blocking thread, so no request waits for it.
pub async fn hand_back_free_memory() {
    let mut every = tokio::time::interval(TRIM_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim takes each arena's lock itself; it only releases free pages.
        let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
    }
}
