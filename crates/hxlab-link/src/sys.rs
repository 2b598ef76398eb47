//! A failed libc call as a [`LinkError`]: the one conversion the shell and the relay share,
//! kept below both so neither imports the other for it.

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
