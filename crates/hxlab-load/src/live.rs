//! The run as it goes, for `hxlab load --metrics-listen`: each worker publishes what its
//! recorder counted four times a second into its slot here, and a scrape merges the slots
//! (and, once the run has ended, shows its totals instead).

use hxlab_contract::metrics::LoadLive;
use hxlab_core::result::RunResult;
use std::sync::Mutex;

/// How often a worker publishes its figures.
pub(crate) const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Live figures of one run: one slot per worker, then the result.
#[derive(Default)]
pub struct Live {
    slots: Mutex<Vec<LoadLive>>,
    done: Mutex<Option<LoadLive>>,
}

impl Live {
    /// Live figures of a run about to start.
    pub fn new() -> std::sync::Arc<Live> {
        std::sync::Arc::new(Live::default())
    }

    /// Worker `index`'s figures so far.
    pub(crate) fn publish(&self, index: usize, figures: LoadLive) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() <= index {
            slots.resize_with(index + 1, LoadLive::default);
        }
        slots[index] = figures;
    }

    /// The run's totals, once it has ended: from now on scrapes show these.
    pub fn finish(&self, result: &RunResult) {
        let mut l = LoadLive {
            started: result.requests_started,
            done: result.requests_done,
            succeeded: result.requests_succeeded,
            failed: result.requests_failed,
            bytes_received: result.bytes.total_received,
            connections: result.connections,
            latency: result.histograms.latency.clone(),
            finished: true,
            ..Default::default()
        };
        for (code, n) in &result.status {
            if let Ok(c) = code.parse() {
                l.status.insert(c, *n);
            }
        }
        l.errors = errors(&result.errors);
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(l);
    }

    /// What a scrape shows: the totals once the run has ended, else the workers' figures
    /// added up.
    pub fn snapshot(&self) -> LoadLive {
        if let Some(done) = self.done.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return done;
        }
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut sum = LoadLive::default();
        for s in slots.iter() {
            sum.started += s.started;
            sum.done += s.done;
            sum.succeeded += s.succeeded;
            sum.failed += s.failed;
            sum.bytes_received += s.bytes_received;
            sum.connections += s.connections;
            sum.latency.merge(&s.latency);
            for (k, v) in &s.status {
                *sum.status.entry(*k).or_default() += v;
            }
            hxlab_core::cc::add_counts(&mut sum.errors, &s.errors);
        }
        sum
    }
}

/// Error counts by kind, as the metric's labels name them.
pub(crate) fn errors(
    e: &hxlab_core::result::ErrorCounts,
) -> std::collections::BTreeMap<String, u64> {
    [
        ("connect", e.connect),
        ("tls", e.tls),
        ("timeout", e.timeout),
        ("reset", e.reset),
        ("protocol", e.protocol),
        ("other", e.other),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
