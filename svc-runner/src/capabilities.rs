//! Root commands keep only the capabilities their job lists: applied in the command's
//! process between fork and exec, with raw system calls only (no allocation, no lock),
//! since the runner is multi-threaded and capabilities are per thread.
//!
//! For a process whose uid is 0, exec normally grants every capability of the bounding
//! set. Here: every capability not kept is dropped from the bounding set (when the
//! runner may, that is when it has CAP_SETPCAP), the permitted, effective and inheritable
//! sets become the kept ones, the ambient set is cleared, and `no_new_privs` is set, so
//! that the exec cannot grant more than the permitted set left here (see
//! capabilities(7), "Capabilities and execution of programs by root", and the
//! no_new_privs rules of prctl(2)).

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets as two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The effective capability set of the calling thread (bit N = capability N): one
/// `capget`, where reading `/proc/self/status` took an open, a read and a parse, three
/// times a run, and left entries below the runner's `/proc` directory that the kernel
/// walks again when the runner is reaped.
pub fn effective() -> io::Result<u64> {
    let data = current()?;
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// The calling thread's capability sets, as `capget` gives them (version 3: two words
/// each). Async-signal-safe.
fn current() -> io::Result<[CapData; 2]> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData words for version 3, the size of `data`.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// Restricts the calling (child) process to the capabilities of `keep` (bit N =
/// capability N) that it has. Async-signal-safe.
pub fn keep_only(keep: u64) -> io::Result<()> {
    let mut data = current()?;
    let permitted = u64::from(data[0].permitted) | (u64::from(data[1].permitted) << 32);
    let kept = keep & permitted;

    // Bounding set: drop what is not kept. Without CAP_SETPCAP (as under the packaged
    // unit) this fails with EPERM; the steps below still bind the exec.
    for cap in 0..64 {
        if kept & (1 << cap) != 0 {
            continue;
        }
        // SAFETY: prctl with integer arguments only.
        let result = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if result != 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Past the last capability of this kernel.
                Some(libc::EINVAL) => break,
                Some(libc::EPERM) => continue,
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let words = [(kept & 0xffff_ffff) as u32, (kept >> 32) as u32];
    for (slot, word) in data.iter_mut().zip(words) {
        *slot = CapData {
            effective: word,
            permitted: word,
            inheritable: word,
        };
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads two CapData words for version 3, the size of `data`.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_effective_set_is_the_one_proc_shows() {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .expect("CapEff line");
        let shown = u64::from_str_radix(line.trim(), 16).expect("hex");
        assert_eq!(super::effective().expect("capget"), shown);
    }
}
