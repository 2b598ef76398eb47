//! [`PrioritiesReport`]: what `hxlab probe URL --priorities` adds to the [`ProbeReport`] — a
//! scorecard per protocol (h2, h3) of how the server schedules responses that share one
//! connection, judged only from what arrived on the wire, behind an emulated link that makes
//! the path the bottleneck.
//!
//! [`ProbeReport`]: crate::ProbeReport

use serde::{Deserialize, Serialize};

/// The scorecards and the link they were measured behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PrioritiesReport {
    /// The emulated link every scorecard ran behind.
    pub link: ProbeLink,
    /// The large resource (`--bulk`, by default the URL probed).
    pub bulk_url: String,
    /// The small resource (`--small`).
    pub small_url: String,
    /// Where the connections went when not to the URL's own host (`--connect-to`).
    pub connect_to: Option<String>,
    /// One scorecard per protocol tried, h2 (or h2c) first, then h3.
    pub scorecards: Vec<PriorityScorecard>,
}

/// The emulated link: a bottleneck of `rate_bits_per_sec` each way, `rtt_ms` of round trip
/// and a drop-tail queue of `queue_bytes` in front of each bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProbeLink {
    /// Bottleneck rate in each direction (bits per second).
    pub rate_bits_per_sec: u64,
    /// Round-trip time added by the link (half each way), milliseconds.
    pub rtt_ms: f64,
    /// The queue in front of each bottleneck, bytes (by default the bandwidth-delay product).
    pub queue_bytes: u64,
}

impl ProbeLink {
    /// Milliseconds the bottleneck takes to carry `bytes`.
    pub fn ms_at_rate(&self, bytes: u64) -> f64 {
        if self.rate_bits_per_sec == 0 {
            return 0.0;
        }
        bytes as f64 * 8.0 * 1000.0 / self.rate_bits_per_sec as f64
    }

    /// The bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_bits_per_sec as f64 / 8.0 * self.rtt_ms / 1000.0).round() as u64
    }
}

/// How a server orders responses on one connection, as the urgent test saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SchedulingClass {
    /// The urgent small response went out alone, ahead of the bulk's remaining bytes.
    UrgencyFirst,
    /// The small response shared the path with the bulk, about byte for byte.
    RoundRobin,
    /// The small response waited until the bulk was done.
    FirstComeFirstServed,
    /// None of the above (the figures say what happened).
    Other,
}

impl SchedulingClass {
    /// The name used in lines and JSON.
    pub fn name(self) -> &'static str {
        match self {
            SchedulingClass::UrgencyFirst => "urgency-first",
            SchedulingClass::RoundRobin => "round-robin",
            SchedulingClass::FirstComeFirstServed => "first-come-first-served",
            SchedulingClass::Other => "other",
        }
    }
}

/// Whether the server acted on a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Honoured {
    /// The responses arrived as the signal asked.
    Yes,
    /// They arrived as if the signal had not been sent.
    No,
    /// Something between (the figures say what).
    Partly,
}

impl Honoured {
    /// The name used in lines and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Honoured::Yes => "yes",
            Honoured::No => "no",
            Honoured::Partly => "partly",
        }
    }
}

/// One protocol's scorecard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PriorityScorecard {
    /// `h2`, `h2c` or `h3`.
    pub protocol: String,
    /// Where the probe's connections went (`host:port` as reached through the link).
    pub address: String,
    /// The urgent test's class; None when the test could not run (see `error`).
    pub verdict: Option<SchedulingClass>,
    /// Why the scorecard is missing or incomplete.
    pub error: Option<String>,
    /// The RFC 9218 urgency test (`priority: u=5` bulk, then `u=0` small).
    pub urgency: Option<UrgentFigures>,
    /// The incremental test (two equal-urgency bulks, without and with `i`).
    pub incremental: Option<IncrementalFigures>,
    /// The PRIORITY_UPDATE test (two equal-urgency bulks, then the second raised to `u=0`).
    pub priority_update: Option<UpdateFigures>,
    /// HTTP/2 only: the RFC 7540 test (no `priority` header; the small's HEADERS depends
    /// exclusively on stream 0 with weight 256, the bulk's weight is 1).
    pub rfc7540: Option<UrgentFigures>,
}

/// What the urgent test measured: a bulk response is under way, then a small one is asked
/// for on the same connection with a more urgent signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UrgentFigures {
    /// The class these figures put the server in.
    pub class: SchedulingClass,
    /// Bulk body bytes that had arrived when the small request was sent.
    pub bulk_bytes_before: u64,
    /// Small body bytes in total.
    pub small_bytes: u64,
    /// Small request sent → its first body byte, ms (None: no byte came).
    pub small_first_byte_ms: Option<f64>,
    /// Small request sent → its last body byte, ms (None: it did not complete).
    pub wait_ms: Option<f64>,
    /// Bulk body bytes that arrived between the small request and the small's first byte:
    /// what the server had committed ahead of it.
    pub committed_bytes: u64,
    /// `committed_bytes` at the bottleneck rate, ms.
    pub committed_ms: f64,
    /// Bulk body bytes that arrived between the small's first and last body byte (≈ 0 when
    /// the small went alone, ≈ its size when the two shared the path). For a small that came
    /// in five or more pieces (HTTP/3 packets) it counts only until half of the small had
    /// arrived, or its furthest offset: lost packets of the small arrive again a round trip
    /// later, while the server rightly sends the bulk meanwhile.
    pub bulk_bytes_during_small: u64,
    /// The small's first body byte came only after the bulk had ended (or never, while the
    /// bulk went on).
    pub small_after_bulk: bool,
    /// The least `wait_ms` could be: one RTT + draining a full queue + the small's own
    /// transmission at the bottleneck rate.
    pub floor_ms: f64,
}

/// What the incremental test measured: for each of two pairs of equal-urgency bulks asked
/// for together, the share of the bytes the less-served one got while both were under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IncrementalFigures {
    /// Whether `u=3` responses came one after another and `u=3, i` ones interleaved.
    pub honoured: Honoured,
    /// `priority: u=3` on both: the lesser share (0: one after the other, 0.5: even).
    pub non_incremental_share: f64,
    /// `priority: u=3, i` on both: the lesser share.
    pub incremental_share: f64,
}

/// What the PRIORITY_UPDATE test measured: two bulks at `u=3` asked for together, then a
/// PRIORITY_UPDATE raising the second to `u=0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateFigures {
    /// Whether the raised response's rest overtook the other.
    pub honoured: Honoured,
    /// The raised response's share of the bytes before the update.
    pub share_before: f64,
    /// Its share of the last half of the bytes that arrived after the update (the first
    /// half holds what the server had committed before it read the update).
    pub share_after: f64,
    /// Body bytes that arrived after the update.
    pub bytes_after: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_names_and_the_link_converts_bytes_to_time() {
        for c in [
            SchedulingClass::UrgencyFirst,
            SchedulingClass::RoundRobin,
            SchedulingClass::FirstComeFirstServed,
            SchedulingClass::Other,
        ] {
            assert_eq!(
                serde_json::to_string(&c).unwrap(),
                format!("\"{}\"", c.name())
            );
        }
        for h in [Honoured::Yes, Honoured::No, Honoured::Partly] {
            assert_eq!(
                serde_json::to_string(&h).unwrap(),
                format!("\"{}\"", h.name())
            );
        }
        let link = ProbeLink {
            rate_bits_per_sec: 10_000_000,
            rtt_ms: 50.0,
            queue_bytes: 62_500,
        };
        assert_eq!(link.bdp_bytes(), 62_500);
        assert!((link.ms_at_rate(62_500) - 50.0).abs() < 1e-9);
    }
}
