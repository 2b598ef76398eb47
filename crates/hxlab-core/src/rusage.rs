//! CPU time as `getrusage(2)` counts it: the one reader behind every CPU figure hxlab reports
//! for itself (`hxlab serve`'s `/stats`, `hxlab load`'s per-thread CPU).

/// (user, system) CPU seconds of this whole process so far; (0, 0) if the kernel refuses.
pub fn process_cpu() -> (f64, f64) {
    read(libc::RUSAGE_SELF)
}

/// (user, system) CPU seconds of the calling thread so far; (0, 0) if the kernel refuses.
pub fn thread_cpu() -> (f64, f64) {
    read(libc::RUSAGE_THREAD)
}

fn read(who: libc::c_int) -> (f64, f64) {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we own, through a valid pointer.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_as_user_time_of_thread_and_process() {
        let (u0, _) = thread_cpu();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (u1, s1) = thread_cpu();
        let (pu, ps) = process_cpu();
        assert!(u1 > u0 && s1 >= 0.0, "{u0} {u1}");
        assert!(pu >= u1 && ps >= 0.0, "{pu} {u1}");
    }
}
