//! Layer `util`, the lowest: helpers with no knowledge of svc's domain. Uses nothing of
//! this crate outside itself.

pub mod fdlimit;
pub mod fsutil;
pub mod html;
pub mod lock;
pub mod space_reserve;

/// Sets the calling thread's nice value to `nice` (on Linux the nice value belongs to
/// the thread): an absolute value, not an increment. Raising it needs no privilege.
pub fn set_thread_nice(nice: libc::c_int) -> std::io::Result<()> {
    // SAFETY: setpriority(2) with PRIO_PROCESS and 0 only changes the calling thread's
    // scheduling priority.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
