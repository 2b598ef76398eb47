//! The judging, sans-IO: an [`ArrivalLog`] of response body bytes as they came off one
//! connection (per HTTP/2 DATA frame, per HTTP/3 stream read), in the order they arrived,
//! and the rules that turn it into the scorecard's figures and classes. Nothing here reads a
//! clock or a socket, so every rule is tested on constructed logs.

use hxlab_contract::{
    Honoured, IncrementalFigures, ProbeLink, SchedulingClass, UpdateFigures, UrgentFigures,
};
use std::time::Duration;

/// Most arrivals one test keeps (a test reads a few MB; an arrival is at least one packet's
/// worth, or an empty end-of-stream).
pub const MAX_ARRIVALS: usize = 1 << 20;

/// Bulk bytes between the small's first and last byte, relative to the small's size, at or
/// below which the small went alone (urgency-first). One 16 KB frame of a 20 KB small is
/// 0.8: well above.
const ALONE: f64 = 0.25;
/// The range of that ratio in which the two shared the path about evenly (round-robin).
const SHARED: (f64, f64) = (0.5, 2.0);
/// The share of the small's bytes after which "during" stops counting, for a small that came
/// in [`PIECES`] or more pieces: packets of it that were lost arrive again a round trip later,
/// while the server rightly sends the bulk meanwhile, and a queue that is full when the small's
/// burst reaches it drops the burst's tail (its last third to half, in the runs measured).
const MOST: f64 = 0.5;
/// See [`MOST`]: a small in fewer pieces (HTTP/2 frames of 16 KB) counts to its last byte.
const PIECES: usize = 5;
/// A lesser share at or below this: one response after the other.
const SEQUENTIAL: f64 = 0.1;
/// A lesser share at or above this: the responses interleaved.
const INTERLEAVED: f64 = 0.25;
/// The raised response's share after a PRIORITY_UPDATE at or above which it overtook.
const OVERTOOK: f64 = 0.9;

/// Body bytes of one response that arrived together (or its end, with no bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    /// When, since the connection started.
    pub at: Duration,
    /// The request's stream id.
    pub stream: u64,
    /// Body bytes (DATA payload without padding, HTTP/3 DATA frame payload).
    pub bytes: u64,
    /// The response ended with this arrival.
    pub fin: bool,
    /// The furthest body offset of its stream received so far, past any gap: the bytes so
    /// far over HTTP/2 (TCP hands them over in order); over HTTP/3 a read that fills a gap
    /// left by a lost packet does not move it.
    pub reach: u64,
}

/// Every arrival on one connection, in the order it came.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArrivalLog {
    /// The arrivals.
    pub arrivals: Vec<Arrival>,
}

impl ArrivalLog {
    /// Adds an arrival; false (and nothing kept) once [`MAX_ARRIVALS`] are held.
    pub fn push(&mut self, a: Arrival) -> bool {
        if self.arrivals.len() >= MAX_ARRIVALS {
            return false;
        }
        self.arrivals.push(a);
        true
    }

    /// Body bytes of `stream` so far.
    pub fn bytes(&self, stream: u64) -> u64 {
        self.arrivals
            .iter()
            .filter(|a| a.stream == stream)
            .map(|a| a.bytes)
            .sum()
    }

    /// Whether `stream`'s response has ended.
    pub fn ended(&self, stream: u64) -> bool {
        self.end_index(stream).is_some()
    }

    /// Body bytes of every stream so far.
    pub fn total(&self) -> u64 {
        self.arrivals.iter().map(|a| a.bytes).sum()
    }

    /// Body bytes that arrived after `t`.
    pub fn total_after(&self, t: Duration) -> u64 {
        self.arrivals
            .iter()
            .filter(|a| a.at > t)
            .map(|a| a.bytes)
            .sum()
    }

    fn end_index(&self, stream: u64) -> Option<usize> {
        self.arrivals
            .iter()
            .position(|a| a.stream == stream && a.fin)
    }

    /// Index of `stream`'s first arrival that carried bytes (or ended it) at or after `from`.
    fn first_index(&self, stream: u64, from: usize) -> Option<usize> {
        (from..self.arrivals.len()).find(|&i| {
            let a = &self.arrivals[i];
            a.stream == stream && (a.bytes > 0 || a.fin)
        })
    }

    /// Bytes of `stream` in arrivals `from..to`.
    fn bytes_in(&self, stream: u64, from: usize, to: usize) -> u64 {
        self.arrivals[from.min(to)..to]
            .iter()
            .filter(|a| a.stream == stream)
            .map(|a| a.bytes)
            .sum()
    }

    /// Index of the first arrival at or after `t`.
    fn index_at(&self, t: Duration) -> usize {
        self.arrivals
            .iter()
            .position(|a| a.at >= t)
            .unwrap_or(self.arrivals.len())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The least time from the small request to its last byte: one round trip, a full queue
/// drained ahead of it, and its own bytes at the bottleneck rate.
pub fn floor_ms(link: &ProbeLink, small_bytes: u64) -> f64 {
    link.rtt_ms + link.ms_at_rate(link.queue_bytes) + link.ms_at_rate(small_bytes)
}

/// Judges the urgent test: `bulk` was under way when the small request went out on `small`
/// at `small_sent`.
pub fn judge_urgent(
    log: &ArrivalLog,
    bulk: u64,
    small: u64,
    small_sent: Duration,
    link: &ProbeLink,
) -> UrgentFigures {
    let sent = log.index_at(small_sent);
    let end = log.arrivals.len();
    let first = log.first_index(small, sent);
    let last = log.end_index(small);
    let bulk_end = log.end_index(bulk);
    let small_bytes = log.bytes(small);
    let after = |i: Option<usize>| i.map(|i| ms(log.arrivals[i].at.saturating_sub(small_sent)));
    let committed_bytes = log.bytes_in(bulk, sent, first.unwrap_or(end));
    let cut = match (first, last) {
        (Some(f), Some(l)) => Some((f, most_of(log, small, f, l))),
        (Some(f), None) => Some((f, end)),
        _ => None,
    };
    let during = cut.map_or(0, |(f, c)| log.bytes_in(bulk, f, c));
    let small_after_bulk = match (first, bulk_end) {
        (Some(f), Some(b)) => f > b,
        // No byte of the small while the bulk kept coming to the end of the test.
        (None, _) => log.bytes_in(bulk, sent, end) > 0,
        (Some(_), None) => false,
    };
    let class = if small_after_bulk {
        SchedulingClass::FirstComeFirstServed
    } else if last.is_none() || small_bytes == 0 {
        SchedulingClass::Other
    } else {
        let counted = cut.map_or(small_bytes, |(f, c)| log.bytes_in(small, f, c + 1));
        let ratio = during as f64 / counted.max(1) as f64;
        if ratio <= ALONE {
            SchedulingClass::UrgencyFirst
        } else if (SHARED.0..=SHARED.1).contains(&ratio) {
            SchedulingClass::RoundRobin
        } else {
            SchedulingClass::Other
        }
    };
    UrgentFigures {
        class,
        bulk_bytes_before: log.bytes_in(bulk, 0, sent),
        small_bytes,
        small_first_byte_ms: after(first),
        wait_ms: after(last),
        committed_bytes,
        committed_ms: link.ms_at_rate(committed_bytes),
        bulk_bytes_during_small: during,
        small_after_bulk,
        floor_ms: floor_ms(link, small_bytes),
    }
}

/// Where "during the small" ends: the arrival that reached its furthest offset (what came
/// after it filled gaps: retransmissions), or its last arrival `last`; for a small that came
/// in [`PIECES`] or more pieces, no later than the arrival that brought it past [`MOST`] of
/// its bytes.
fn most_of(log: &ArrivalLog, small: u64, first: usize, last: usize) -> usize {
    let pieces: Vec<usize> = (first..=last)
        .filter(|&i| log.arrivals[i].stream == small && log.arrivals[i].bytes > 0)
        .collect();
    let furthest = pieces.iter().map(|&i| log.arrivals[i].reach).max();
    let reached = pieces
        .iter()
        .copied()
        .find(|&i| Some(log.arrivals[i].reach) == furthest)
        .unwrap_or(last);
    if pieces.len() < PIECES {
        return reached;
    }
    let total: u64 = pieces.iter().map(|&i| log.arrivals[i].bytes).sum();
    let mut seen = 0;
    pieces
        .into_iter()
        .find(|&i| {
            seen += log.arrivals[i].bytes;
            seen as f64 >= MOST * total as f64
        })
        .unwrap_or(last)
        .min(reached)
}

/// The lesser of two responses' shares of their bytes while both were under way (up to the
/// first one's end): 0 when one came after the other, 0.5 when they alternated evenly.
pub fn lesser_share(log: &ArrivalLog, a: u64, b: u64) -> f64 {
    let end = [log.end_index(a), log.end_index(b)]
        .into_iter()
        .flatten()
        .min()
        .map_or(log.arrivals.len(), |i| i + 1);
    let (x, y) = (log.bytes_in(a, 0, end), log.bytes_in(b, 0, end));
    if x + y == 0 {
        return 0.0;
    }
    x.min(y) as f64 / (x + y) as f64
}

/// Judges the incremental test from the lesser shares of a `u=3` pair and a `u=3, i` pair.
pub fn judge_incremental(non_incremental_share: f64, incremental_share: f64) -> IncrementalFigures {
    let sequential = non_incremental_share <= SEQUENTIAL;
    let interleaved = incremental_share >= INTERLEAVED;
    let honoured = match (sequential, interleaved) {
        (true, true) => Honoured::Yes,
        // Both pairs treated alike: the parameter made no difference.
        (true, false) if incremental_share <= SEQUENTIAL => Honoured::No,
        (false, true) if non_incremental_share >= INTERLEAVED => Honoured::No,
        _ => Honoured::Partly,
    };
    IncrementalFigures {
        honoured,
        non_incremental_share,
        incremental_share,
    }
}

/// Judges the PRIORITY_UPDATE test: `first` and `raised` were asked for together at equal
/// urgency, and at `update_sent` `raised` was moved to `u=0`. Only arrivals up to the first
/// end of either count (after that the other is alone whatever the server does).
pub fn judge_update(
    log: &ArrivalLog,
    first: u64,
    raised: u64,
    update_sent: Duration,
) -> UpdateFigures {
    let end = [log.end_index(first), log.end_index(raised)]
        .into_iter()
        .flatten()
        .min()
        .map_or(log.arrivals.len(), |i| i + 1);
    let split = log.index_at(update_sent).min(end);
    let share = |from: usize, to: usize| {
        let (x, y) = (
            log.bytes_in(raised, from, to),
            log.bytes_in(first, from, to),
        );
        if x + y == 0 {
            0.0
        } else {
            x as f64 / (x + y) as f64
        }
    };
    let share_before = share(0, split);
    let bytes_after: u64 = log.arrivals[split..end].iter().map(|a| a.bytes).sum();
    // The second half of what came after the update: past what the server had committed.
    let mut seen = 0;
    let half = (split..end)
        .find(|&i| {
            seen += log.arrivals[i].bytes;
            seen * 2 > bytes_after
        })
        .unwrap_or(end);
    let share_after = share(half, end);
    let honoured = if share_after >= OVERTOOK && share_before < OVERTOOK {
        Honoured::Yes
    } else if share_after - share_before < 0.15 {
        Honoured::No
    } else {
        Honoured::Partly
    };
    UpdateFigures {
        honoured,
        share_before,
        share_after,
        bytes_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BULK: u64 = 1;
    const SMALL: u64 = 3;
    const FRAME: u64 = 16_384;

    fn link() -> ProbeLink {
        ProbeLink {
            rate_bits_per_sec: 10_000_000,
            rtt_ms: 50.0,
            queue_bytes: 62_500,
        }
    }

    /// A log from (stream, bytes, fin) in order, one arrival per millisecond, each stream's
    /// bytes in order.
    fn log_of(parts: &[(u64, u64, bool)]) -> ArrivalLog {
        let mut log = ArrivalLog::default();
        for (i, &(stream, bytes, fin)) in parts.iter().enumerate() {
            let reach = log.bytes(stream) + bytes;
            log.push(Arrival {
                at: Duration::from_millis(i as u64),
                stream,
                bytes,
                fin,
                reach,
            });
        }
        log
    }

    /// `n` bulk frames.
    fn bulk(n: usize) -> Vec<(u64, u64, bool)> {
        vec![(BULK, FRAME, false); n]
    }

    /// The small request goes out at 20 ms (after 20 bulk frames); then `after`.
    fn urgent_log(after: &[(u64, u64, bool)]) -> (ArrivalLog, Duration) {
        let mut parts = bulk(20);
        parts.extend_from_slice(after);
        (log_of(&parts), Duration::from_millis(20))
    }

    #[test]
    fn the_small_alone_after_committed_bytes_is_urgency_first() {
        let mut after = bulk(5); // committed
        after.extend([(SMALL, FRAME, false), (SMALL, 3616, true)]);
        after.extend(bulk(10));
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::UrgencyFirst);
        assert_eq!(f.bulk_bytes_before, 20 * FRAME);
        assert_eq!(f.small_bytes, 20_000);
        assert_eq!(f.committed_bytes, 5 * FRAME);
        assert!((f.committed_ms - link().ms_at_rate(5 * FRAME)).abs() < 1e-9);
        assert_eq!(f.bulk_bytes_during_small, 0);
        assert_eq!(f.small_first_byte_ms, Some(5.0));
        assert_eq!(f.wait_ms, Some(6.0));
        assert!(!f.small_after_bulk);
        // 50 ms RTT + 50 ms of queue + 16 ms of the small itself.
        assert!((f.floor_ms - 116.0).abs() < 1e-9, "{}", f.floor_ms);
    }

    #[test]
    fn a_bulk_frame_between_the_smalls_frames_is_round_robin() {
        let mut after = bulk(2);
        after.extend([
            (SMALL, FRAME, false),
            (BULK, FRAME, false),
            (SMALL, 3616, true),
        ]);
        after.extend(bulk(3));
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::RoundRobin);
        assert_eq!(f.bulk_bytes_during_small, FRAME);
        // Packet-sized alternation (HTTP/3) is round-robin too.
        let mut after = Vec::new();
        for _ in 0..16 {
            after.extend([(SMALL, 1250, false), (BULK, 1250, false)]);
        }
        after.push((SMALL, 0, true));
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::RoundRobin);
        // Counted until half of the small: 8 of its 16 pieces, 7 of the bulk's between.
        assert_eq!(f.bulk_bytes_during_small, 7 * 1250);
    }

    #[test]
    fn a_lost_packet_of_the_small_does_not_make_it_shared() {
        // HTTP/3: the small alone in 16 packets, one lost; the bulk goes on for a round trip
        // until the lost packet arrives again.
        let mut after = bulk(2);
        after.extend(vec![(SMALL, 1250, false); 15]);
        after.extend(bulk(6));
        after.extend([(SMALL, 1250, false), (SMALL, 0, true)]);
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::UrgencyFirst);
        assert_eq!(f.bulk_bytes_during_small, 0);
        // Its wait still ends with its last byte.
        assert_eq!(f.wait_ms, Some(24.0));
        // Half of it lost at once (a full queue): the first half reached its last offset,
        // and the retransmitted half filled the gaps a round trip later.
        let mut after = bulk(2);
        after.extend(vec![(SMALL, 1250, false); 8]);
        after.extend(bulk(6));
        after.extend(vec![(SMALL, 1250, false); 8]);
        after.push((SMALL, 0, true));
        let (mut log, sent) = urgent_log(&after);
        for a in log.arrivals.iter_mut().filter(|a| a.stream == SMALL) {
            a.reach = 20_000;
        }
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::UrgencyFirst);
        assert_eq!(f.bulk_bytes_during_small, 0);
    }

    #[test]
    fn a_small_that_waits_for_the_bulk_to_end_is_first_come_first_served() {
        let mut after = bulk(30);
        after.push((BULK, 100, true));
        after.extend([(SMALL, FRAME, false), (SMALL, 3616, true)]);
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::FirstComeFirstServed);
        assert!(f.small_after_bulk);
        assert_eq!(f.bulk_bytes_during_small, 0);
        assert_eq!(f.committed_bytes, 30 * FRAME + 100);
        // A small that never came while the bulk went on until the test stopped.
        let (log, sent) = urgent_log(&bulk(40));
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::FirstComeFirstServed);
        assert_eq!((f.small_first_byte_ms, f.wait_ms), (None, None));
    }

    #[test]
    fn anything_else_is_other() {
        // The bulk got three times the small's bytes while the small trickled.
        let mut after = vec![(SMALL, 5_000, false)];
        after.extend(bulk(4));
        after.push((SMALL, 15_000, true));
        let (log, sent) = urgent_log(&after);
        assert_eq!(
            judge_urgent(&log, BULK, SMALL, sent, &link()).class,
            SchedulingClass::Other
        );
        // The small started but did not end before the test stopped.
        let mut after = vec![(SMALL, 5_000, false)];
        after.extend(bulk(4));
        let (log, sent) = urgent_log(&after);
        let f = judge_urgent(&log, BULK, SMALL, sent, &link());
        assert_eq!(f.class, SchedulingClass::Other);
        assert_eq!(f.wait_ms, None);
        assert_eq!(f.bulk_bytes_during_small, 4 * FRAME);
    }

    #[test]
    fn shares_of_pairs_say_sequential_or_interleaved() {
        let a = 1;
        let b = 3;
        let sequential = log_of(&[
            (a, FRAME, false),
            (a, FRAME, false),
            (a, FRAME, true),
            (b, FRAME, false),
            (b, FRAME, false),
        ]);
        assert_eq!(lesser_share(&sequential, a, b), 0.0);
        let alternating = log_of(&[
            (a, FRAME, false),
            (b, FRAME, false),
            (a, FRAME, false),
            (b, FRAME, false),
        ]);
        assert_eq!(lesser_share(&alternating, a, b), 0.5);
        assert_eq!(lesser_share(&ArrivalLog::default(), a, b), 0.0);

        assert_eq!(judge_incremental(0.0, 0.5).honoured, Honoured::Yes);
        assert_eq!(judge_incremental(0.5, 0.5).honoured, Honoured::No);
        assert_eq!(judge_incremental(0.02, 0.0).honoured, Honoured::No);
        assert_eq!(judge_incremental(0.15, 0.5).honoured, Honoured::Partly);
        assert_eq!(judge_incremental(0.0, 0.15).honoured, Honoured::Partly);
    }

    #[test]
    fn an_update_is_honoured_when_the_raised_response_takes_over() {
        let (first, raised) = (1, 3);
        let update = Duration::from_millis(10);
        // Sequential before; after the update, committed bytes of the first, then only the
        // raised one.
        let mut parts = vec![(first, FRAME, false); 10];
        parts.extend(vec![(first, FRAME, false); 4]);
        parts.extend(vec![(raised, FRAME, false); 20]);
        let f = judge_update(&log_of(&parts), first, raised, update);
        assert_eq!(f.honoured, Honoured::Yes);
        assert_eq!((f.share_before, f.share_after), (0.0, 1.0));
        assert_eq!(f.bytes_after, 24 * FRAME);
        // Round-robin before and after: nothing changed.
        let rr: Vec<_> = (0..40)
            .map(|i| (if i % 2 == 0 { first } else { raised }, FRAME, false))
            .collect();
        let f = judge_update(&log_of(&rr), first, raised, update);
        assert_eq!(f.honoured, Honoured::No);
        assert_eq!(f.share_before, 0.5);
        assert!((f.share_after - 0.5).abs() < 0.05, "{}", f.share_after);
        // Ignored: the first goes on alone until its end; the raised one is alone only after.
        let mut ignored = vec![(first, FRAME, false); 30];
        ignored.push((first, 10, true));
        ignored.extend(vec![(raised, FRAME, false); 30]);
        let f = judge_update(&log_of(&ignored), first, raised, update);
        assert_eq!(f.honoured, Honoured::No);
        assert_eq!(f.share_after, 0.0);
        // A move from sequential to even sharing is partly.
        let mut partly = vec![(first, FRAME, false); 10];
        partly.extend(rr.iter().copied());
        let f = judge_update(&log_of(&partly), first, raised, update);
        assert_eq!(f.honoured, Honoured::Partly);
    }

    #[test]
    fn the_log_is_bounded() {
        let mut log = ArrivalLog::default();
        let a = Arrival {
            at: Duration::ZERO,
            stream: 1,
            bytes: 1,
            fin: false,
            reach: 1,
        };
        for _ in 0..MAX_ARRIVALS {
            assert!(log.push(a));
        }
        assert!(!log.push(a));
        assert_eq!(log.total(), MAX_ARRIVALS as u64);
        assert_eq!(log.total_after(Duration::ZERO), 0);
    }
}
