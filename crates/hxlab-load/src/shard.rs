//! A run in parts (`--shard I/N`, `--start-at`): how this process's share of the run is cut
//! into worker threads, which open-model timetable entries its clients take, the wait for
//! the agreed start, and the [`ShardInfo`] the result records.
//!
//! The split is the whole run's: connections are numbered 0..c over every part, the part
//! takes [`Shard::range`] of them, its workers split that range again, and `-n` follows the
//! connections ([`crate::config::split`]), so the parts' shares add up to exactly what was
//! asked. In the open model the run has one timetable, request `j` due at `j / R`; part `I`
//! of `N` takes the `j` with `j mod N = I`, and its `k`-th connection (of `c_I`) takes every
//! `N·c_I`-th of those, from `I + N·k`. Merged, the parts' timetables are a single
//! generator's, so each part's coordinated-omission correction stays valid and the merged
//! `requests_scheduled` is the single run's.

use crate::config::{split, Shard};
use crate::LoadConfig;
use hxlab_core::shard::ShardInfo;
use std::time::{Duration, SystemTime};

/// One worker thread's share.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// Its connections.
    pub clients: u64,
    /// Closed model with `-n`: its requests.
    pub requests: u64,
    /// Open model: its clients' timetable entries.
    pub timetable: Option<Timetable>,
}

/// Which open-model timetable entries a worker's clients take: client `k` (0-based within the
/// worker) takes `first + k·step`, then every `stride`-th, below `limit` (None: the run's
/// deadline decides).
#[derive(Clone, Debug, PartialEq)]
pub struct Timetable {
    /// Requests per second of the whole run.
    pub rate: f64,
    /// Entry of the worker's first client.
    pub first: u64,
    /// Distance between the first entries of neighbouring clients (the shard count).
    pub step: u64,
    /// Distance between a client's entries (shards × the part's connections).
    pub stride: u64,
    /// `-n`: the run's timetable length.
    pub limit: Option<u64>,
}

/// This process's part (the whole run when `cfg.shard` is None).
pub fn shard_of(cfg: &LoadConfig) -> Shard {
    cfg.shard.unwrap_or(Shard { index: 0, count: 1 })
}

/// The worker threads' shares of this part: `threads` clamped to the part's connections.
pub fn shares(cfg: &LoadConfig) -> Vec<Share> {
    let shard = shard_of(cfg);
    let (s0, s1) = shard.range(cfg.clients);
    let part = s1 - s0;
    let threads = cfg.threads.min(part).max(1);
    (0..threads)
        .map(|w| {
            let c0 = s0 + part * w / threads;
            let c1 = s0 + part * (w + 1) / threads;
            Share {
                clients: c1 - c0,
                requests: split(cfg.requests, cfg.clients, c0, c1),
                timetable: cfg.rate.map(|rate| Timetable {
                    rate,
                    first: shard.index + shard.count * (c0 - s0),
                    step: shard.count,
                    stride: shard.count * part,
                    limit: cfg.duration.is_none().then_some(cfg.requests),
                }),
            }
        })
        .collect()
}

/// The run id this part records: `--run-id`; for a shard without one, a digest of the
/// command line (configuration without the shard index) and `--start-at`, which every shard
/// of one command line computes alike; for a run on its own, random.
pub fn run_id(cfg: &LoadConfig) -> String {
    if let Some(id) = &cfg.run_id {
        return id.clone();
    }
    if let Some(shard) = cfg.shard {
        let mut whole = cfg.clone();
        whole.shard = Some(Shard {
            index: 0,
            count: shard.count,
        });
        whole.progress = false;
        return format!("cfg-{:016x}", fnv1a(whole.to_json().as_bytes()));
    }
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per process; the time and PID separate the rest.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(unix_now().to_bits() as u128);
    h.write_u32(std::process::id());
    format!("run-{:016x}", h.finish())
}

/// FNV-1a, 64 bits: stable across builds and machines (std's hashers are not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Wall-clock now, Unix seconds.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How the start went: when it happened and how late against `--start-at`.
#[derive(Clone, Copy, Debug)]
pub struct Started {
    /// Unix seconds.
    pub unix_s: f64,
    /// Seconds after `--start-at` (None without it).
    pub skew_s: Option<f64>,
    /// Later than the tolerance allows.
    pub late: bool,
}

/// Sleeps until `cfg.start_at` (at once without it, or when it has passed) and says how late
/// the start is. Bounded: `validate` refuses a start more than a day away.
pub fn wait_for_start(cfg: &LoadConfig) -> Started {
    let Some(at) = cfg.start_at else {
        return Started {
            unix_s: unix_now(),
            skew_s: None,
            late: false,
        };
    };
    loop {
        let left = at - unix_now();
        if left <= 0.0 {
            break;
        }
        // In slices, so a wall clock stepped by NTP meanwhile is followed.
        std::thread::sleep(Duration::from_secs_f64(left.min(0.5)));
    }
    let now = unix_now();
    let skew = now - at;
    Started {
        unix_s: now,
        skew_s: Some(skew),
        late: skew > cfg.start_tolerance.as_secs_f64(),
    }
}

/// What the result records of this part.
pub fn shard_info(cfg: &LoadConfig, run_id: String, started: Started) -> ShardInfo {
    let shard = shard_of(cfg);
    let (c0, c1) = shard.range(cfg.clients);
    ShardInfo {
        run_id,
        index: shard.index,
        count: shard.count,
        clients: c1 - c0,
        requests: cfg.shard_requests().unwrap_or(0),
        start_at_unix_s: cfg.start_at,
        started_unix_s: started.unix_s,
        start_skew_s: started.skew_s,
        late: started.late,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::Schedule;

    fn cfg(c: u64, threads: u64, shard: Option<Shard>) -> LoadConfig {
        LoadConfig {
            urls: vec!["http://127.0.0.1:1/".into()],
            requests: 1000,
            clients: c,
            threads,
            rate: Some(100.0),
            shard,
            ..Default::default()
        }
    }

    /// Every entry of the run's timetable is taken by exactly one client of one worker of
    /// one shard, whatever the split.
    #[test]
    fn the_parts_timetables_are_the_single_runs() {
        for (c, threads, count) in [(1, 1, 1), (10, 3, 1), (10, 2, 3), (7, 4, 7), (100, 1, 2)] {
            let mut taken = vec![0u32; 1000];
            for index in 0..count {
                let cfg = cfg(c, threads, Some(Shard { index, count }));
                let mut requests = 0;
                for share in shares(&cfg) {
                    let t = share.timetable.unwrap();
                    for k in 0..share.clients {
                        let mut s =
                            Schedule::new(t.rate, t.first + k * t.step, t.stride, t.limit.unwrap());
                        while let Some((j, due)) = s.take() {
                            assert_eq!(due, Duration::from_secs_f64(j as f64 / 100.0));
                            taken[j as usize] += 1;
                            requests += 1;
                        }
                    }
                }
                assert_eq!(requests, cfg.shard_requests().unwrap());
            }
            assert!(taken.iter().all(|&n| n == 1), "c {c} t {threads} N {count}");
        }
    }

    #[test]
    fn closed_model_shares_add_up_to_the_run() {
        for (c, threads, count) in [(100, 2, 2), (9, 4, 3), (5, 1, 5)] {
            let mut clients = 0;
            let mut requests = 0;
            for index in 0..count {
                let mut cfg = cfg(c, threads, Some(Shard { index, count }));
                cfg.rate = None;
                let s = shares(&cfg);
                assert!(s.len() as u64 <= threads);
                assert_eq!(
                    s.iter().map(|s| s.requests).sum::<u64>(),
                    cfg.shard_requests().unwrap()
                );
                clients += s.iter().map(|s| s.clients).sum::<u64>();
                requests += s.iter().map(|s| s.requests).sum::<u64>();
            }
            assert_eq!((clients, requests), (c, 1000));
        }
    }

    #[test]
    fn shards_of_one_command_line_share_a_run_id() {
        let a = run_id(&cfg(4, 1, Some(Shard { index: 0, count: 2 })));
        let b = run_id(&cfg(4, 1, Some(Shard { index: 1, count: 2 })));
        assert_eq!(a, b);
        assert_ne!(a, run_id(&cfg(4, 1, Some(Shard { index: 0, count: 4 }))));
        let mut other = cfg(4, 1, Some(Shard { index: 0, count: 2 }));
        other.start_at = Some(1.0);
        assert_ne!(a, run_id(&other));
        // On its own: a new id each run.
        assert_ne!(run_id(&cfg(4, 1, None)), run_id(&cfg(4, 1, None)));
        let mut named = cfg(4, 1, None);
        named.run_id = Some("job-1".into());
        assert_eq!(run_id(&named), "job-1");
    }

    #[test]
    fn a_start_in_the_past_is_at_once_and_late() {
        let mut c = cfg(1, 1, None);
        c.start_at = Some(unix_now() - 5.0);
        let s = wait_for_start(&c);
        assert!(s.late && s.skew_s.unwrap() >= 5.0);
        c.start_at = Some(unix_now() + 0.2);
        let s = wait_for_start(&c);
        assert!(!s.late, "{s:?}");
        assert!((0.0..1.0).contains(&s.skew_s.unwrap()), "{s:?}");
    }
}
