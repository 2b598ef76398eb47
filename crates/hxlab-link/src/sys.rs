//! What the shell, the relay and the capture share, kept below them so none imports another
//! for it: a failed libc call as a [`LinkError`], and the monotonic clock.

use crate::LinkError;

/// The last OS error, as a setup failure of `what`.
pub(crate) fn os_err(what: &str) -> LinkError {
    LinkError::Setup(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// `ret` when the call succeeded (not negative), else the OS error of `what`.
pub(crate) fn cvt(ret: libc::c_int, what: &str) -> Result<libc::c_int, LinkError> {
    if ret < 0 {
        Err(os_err(what))
    } else {
        Ok(ret)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock the link and its capture run on.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
