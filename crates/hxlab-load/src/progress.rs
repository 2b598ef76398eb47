//! The progress bar of `hxlab load` (`--progress`): drawn by the thread that started the
//! workers, from counters the workers update ten times a second, so the hot path only
//! stores a number.

use crate::LoadConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Draws a progress bar on stderr (requests done, or time for `-D`) until every worker
/// thread in `handles` has finished; `counters` are the workers' done counts.
pub(crate) fn draw_progress<T>(
    cfg: &LoadConfig,
    handles: &[std::thread::JoinHandle<T>],
    counters: &[Arc<AtomicU64>],
) {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let by_time = cfg.duration.is_some();
    let total = match cfg.duration {
        Some(d) => (d + cfg.warm_up).as_millis() as u64,
        None => cfg.requests,
    };
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
    let template = if by_time {
        "{bar:40} {elapsed}/{duration} {msg}"
    } else {
        "{bar:40} {pos}/{len} requests {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let t0 = Instant::now();
    while handles.iter().any(|h| !h.is_finished()) {
        let done: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        if by_time {
            bar.set_position(t0.elapsed().as_millis() as u64);
            bar.set_message(format!("{done} requests"));
        } else {
            bar.set_position(done);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}
