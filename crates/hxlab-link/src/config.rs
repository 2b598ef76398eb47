//! What a link looks like: per-direction delay, jitter, loss, bottleneck and queue, and the
//! parsers for the forms users write them in (`1%`, `ge:1%,10%,70%,0%`, `100p`, `64KiB`).

use crate::trace::Trace;
use crate::LinkError;
use std::sync::Arc;
use std::time::Duration;

/// Packet loss at the link's ingress.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// No loss.
    None,
    /// Each packet is lost independently with this probability (0..=1).
    Random(f64),
    /// Gilbert-Elliott bursty loss, as netem's `gemodel p r 1-h 1-k` (probabilities 0..=1).
    GilbertElliott {
        /// Probability per packet of moving from the good to the bad state.
        p: f64,
        /// Probability per packet of moving from the bad back to the good state.
        r: f64,
        /// Loss probability in the bad state (netem's 1-h).
        loss_bad: f64,
        /// Loss probability in the good state (netem's 1-k).
        loss_good: f64,
    },
}

/// How much the queue in front of the bottleneck holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// No limit (only sensible with a short test).
    Unlimited,
    /// At most this many packets.
    Packets(usize),
    /// At most this many bytes.
    Bytes(usize),
}

/// Queue management.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Aqm {
    /// Drop arrivals when the queue is full.
    DropTail,
    /// CoDel (RFC 8289, target 5 ms, interval 100 ms) at dequeue, plus the hard limit.
    Codel,
}

/// The bottleneck that drains the queue.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Server {
    /// Packets leave as soon as they arrive.
    Unlimited,
    /// A fixed rate in bits per second; each packet takes len*8/rate to serialise.
    Rate(u64),
    /// A mahimahi delivery trace (not in the JSON form: give the trace file to `hxlab link`).
    #[serde(skip)]
    Trace(Arc<Trace>),
}

/// One direction of the link.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct DirectionConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Jitter: each packet's delay varies uniformly in ±jitter.
    pub jitter: Duration,
    /// Let jitter reorder packets (off: a packet never overtakes the previous one).
    pub reorder: bool,
    /// Ingress loss.
    pub loss: Loss,
    /// Bottleneck.
    pub server: Server,
    /// Queue limit in front of the bottleneck.
    pub queue: QueueLimit,
    /// Queue management.
    pub aqm: Aqm,
    /// Drop every UDP packet (IPv4 or IPv6) at ingress, before the loss stage, and count it
    /// (`dropped_udp`): a network where QUIC cannot pass, so a browser falls back to TCP.
    pub block_udp: bool,
}

/// The largest unit a pure-delay direction carries whole: a GSO super-packet's segments
/// together (64 KiB of payload, each segment with its own headers), rounded up.
pub const MAX_SUPER_PACKET_WIRE: usize = 128 * 1024;

impl DirectionConfig {
    /// True when this direction does nothing to a packet but hold it for a constant `delay`:
    /// no loss, no jitter, no bottleneck (rate or trace), no CoDel, and a queue limit that
    /// cannot drop (with no bottleneck the queue is empty at every arrival, so a packet limit
    /// never bites; a byte limit could refuse a whole super-packet whose segments would each
    /// fit, so it must hold [`MAX_SUPER_PACKET_WIRE`]).
    ///
    /// Then a packet's fate depends only on its arrival time (delivered at arrival + delay,
    /// in order), and the segments of a GSO super-packet, which arrive together, would all be
    /// delivered at the same instant in the same order: carrying the super-packet whole is
    /// exactly the same link, which is what lets the shell skip segmenting it.
    pub fn is_pure_delay(&self) -> bool {
        let lossless = match self.loss {
            Loss::None => true,
            Loss::Random(p) => p == 0.0,
            Loss::GilbertElliott { .. } => false,
        };
        lossless && self.is_delay_and_loss()
    }

    /// True when this direction is a constant delay plus ingress loss (random or
    /// Gilbert-Elliott) and nothing else: no jitter, no bottleneck, no CoDel, and a queue
    /// limit that cannot drop (as for [`DirectionConfig::is_pure_delay`]).
    ///
    /// Then the segments of a GSO super-packet that survive the loss stage (drawn for each
    /// segment in order, as if they had arrived one by one) are all delivered at the same
    /// instant in the same order, so each unbroken run of survivors can travel as one
    /// smaller super-packet: the shell keeps super-packets whole between lost segments.
    pub fn is_delay_and_loss(&self) -> bool {
        self.jitter.is_zero()
            && self.server == Server::Unlimited
            && self.aqm == Aqm::DropTail
            && match self.queue {
                QueueLimit::Unlimited | QueueLimit::Packets(_) => true,
                QueueLimit::Bytes(n) => n >= MAX_SUPER_PACKET_WIRE,
            }
    }

    fn validate(&self) -> Result<(), String> {
        if self.delay > MAX_DELAY {
            return Err(format!(
                "delay {:?}: more than 10 minutes is not a link",
                self.delay
            ));
        }
        if self.jitter > MAX_DELAY {
            return Err(format!(
                "jitter {:?}: more than 10 minutes is not a link",
                self.jitter
            ));
        }
        if let Server::Rate(r) = self.server {
            if !(MIN_RATE..=MAX_RATE).contains(&r) {
                return Err(format!(
                    "rate {r} bit/s: a link rate must be between 1kbit and 100gbit"
                ));
            }
        }
        let probability = |p: f64| p.is_finite() && (0.0..=1.0).contains(&p);
        let ok = match self.loss {
            Loss::None => true,
            Loss::Random(p) => probability(p),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => [p, r, loss_bad, loss_good].into_iter().all(probability),
        };
        if !ok {
            return Err(format!(
                "loss {:?}: probabilities must be between 0% and 100%",
                self.loss
            ));
        }
        match self.queue {
            QueueLimit::Packets(0) | QueueLimit::Bytes(0..1500) => Err(format!(
                "queue {:?}: must hold at least one packet",
                self.queue
            )),
            _ => Ok(()),
        }
    }
}

/// netem's default queue limit, used when `--queue` is not given.
pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);

impl Default for DirectionConfig {
    fn default() -> Self {
        DirectionConfig {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: false,
            loss: Loss::None,
            server: Server::Unlimited,
            queue: DEFAULT_QUEUE,
            aqm: Aqm::DropTail,
            block_udp: false,
        }
    }
}

/// A delay as a user gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// Added in each direction (`hxlab link --delay`).
    OneWay(Duration),
    /// A round trip, half each way (a profile's RTT, the lab's `rtt` factor).
    RoundTrip(Duration),
}

impl Delay {
    /// The delay each direction adds.
    pub fn one_way(self) -> Duration {
        match self {
            Delay::OneWay(d) => d,
            Delay::RoundTrip(rtt) => rtt / 2,
        }
    }
}

/// A whole link: `down` is outside → inside (server → client), `up` the reverse.
///
/// Its JSON form (`hxlab link --config FILE`) has the fields' names; durations are
/// `{"secs": S, "nanos": N}`, loss `"none"`, `{"random": P}` or `{"gilbert_elliott": {...}}`,
/// the bottleneck `"unlimited"` or `{"rate": BITS_PER_SECOND}`, the queue `"unlimited"`,
/// `{"packets": N}` or `{"bytes": N}`; missing fields take the defaults, unknown ones are
/// refused.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Outside → inside.
    pub down: DirectionConfig,
    /// Inside → outside.
    pub up: DirectionConfig,
    /// Seed for loss and jitter draws; the same seed gives the same decisions.
    pub seed: u64,
    /// The profile this came from, if any (for reports).
    pub profile: Option<String>,
}

impl LinkConfig {
    /// Drops UDP in both directions (`hxlab link --block-udp`): see
    /// [`DirectionConfig::block_udp`].
    pub fn block_udp(&mut self) {
        self.down.block_udp = true;
        self.up.block_udp = true;
    }

    /// True when either direction drops UDP.
    pub fn blocks_udp(&self) -> bool {
        self.down.block_udp || self.up.block_udp
    }

    /// The link a named profile describes (see [`crate::profiles`]): RTT split half each way,
    /// down/up rates, profile loss.
    pub fn from_profile(name: &str) -> Result<LinkConfig, LinkError> {
        let p = crate::profiles::find(name)?;
        let one_way = Delay::RoundTrip(p.rtt()).one_way();
        let mut cfg = LinkConfig {
            profile: Some(p.qualified_name()),
            ..LinkConfig::default()
        };
        for (d, bps) in [
            (&mut cfg.down, p.down_bits_per_sec()),
            (&mut cfg.up, p.up_bits_per_sec()),
        ] {
            d.delay = one_way;
            d.server = Server::Rate(bps);
            d.loss = if p.loss > 0.0 {
                Loss::Random(p.loss)
            } else {
                Loss::None
            };
        }
        Ok(cfg)
    }

    /// Checks the bounds every entry point shares (`hxlab link`, `hxlab page`, the lab):
    /// delay and jitter at most [`MAX_DELAY`], rates from [`MIN_RATE`] to [`MAX_RATE`],
    /// probabilities from 0 to 1, a queue that holds at least one packet. [`Link::start`]
    /// checks it too.
    ///
    /// [`Link::start`]: crate::Link::start
    pub fn validate(&self) -> Result<(), LinkError> {
        for (name, d) in [("down", &self.down), ("up", &self.up)] {
            d.validate()
                .map_err(|e| LinkError::Config(format!("{name}link {e}")))?;
        }
        Ok(())
    }

    /// Reads the JSON form and [validates](LinkConfig::validate) it; the error is one line.
    pub fn from_json(text: &str) -> Result<LinkConfig, LinkError> {
        let cfg: LinkConfig =
            serde_json::from_str(text).map_err(|e| LinkError::Config(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The JSON form; a link with a trace has none (its trace lives in a file).
    pub fn to_json(&self) -> Result<String, LinkError> {
        serde_json::to_string(self).map_err(|e| LinkError::Config(e.to_string()))
    }

    /// Sets both directions' one-way delay.
    pub fn with_delay(mut self, one_way: Duration) -> Self {
        self.down.delay = one_way;
        self.up.delay = one_way;
        self
    }
}

/// A seed for a link whose draws need not repeat: the clock's nanoseconds mixed with the
/// process id.
pub fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32)
}

fn bad(what: &str, input: &str, reason: &str) -> LinkError {
    LinkError::Config(format!("{what} {input:?}: {reason}"))
}

/// Longest delay or jitter a link takes; more is certainly a typo, not a link.
pub const MAX_DELAY: Duration = Duration::from_secs(600);
/// Slowest link rate, bits per second.
pub const MIN_RATE: u64 = 1_000;
/// Fastest link rate, bits per second.
pub const MAX_RATE: u64 = 100_000_000_000;

/// Parses a link delay or jitter (`20ms`), at most [`MAX_DELAY`]; `what` names it in errors.
pub fn parse_delay(what: &str, input: &str) -> Result<Duration, LinkError> {
    let d =
        hxlab_core::parse_duration(input).map_err(|e| LinkError::Config(format!("{what}: {e}")))?;
    if d > MAX_DELAY {
        return Err(bad(what, input, "more than 10 minutes is not a link"));
    }
    Ok(d)
}

/// Parses a link rate (`10mbit`), between [`MIN_RATE`] and [`MAX_RATE`].
pub fn parse_link_rate(what: &str, input: &str) -> Result<u64, LinkError> {
    let r = hxlab_core::parse_rate(input).map_err(|e| LinkError::Config(format!("{what}: {e}")))?;
    if !(MIN_RATE..=MAX_RATE).contains(&r) {
        return Err(bad(
            what,
            input,
            "a link rate must be between 1kbit and 100gbit",
        ));
    }
    Ok(r)
}

/// Parses a probability written as `1%`, `0.5%` or a fraction `0.01`.
pub fn parse_probability(input: &str) -> Result<f64, LinkError> {
    let s = input.trim();
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (s, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| bad("probability", input, "expected e.g. 1% or 0.01"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad("probability", input, "must be between 0% and 100%"));
    }
    let p = v / scale;
    if p > 1.0 {
        return Err(bad("probability", input, "must be between 0% and 100%"));
    }
    Ok(p)
}

/// Parses `--loss`: `1%` (random) or `ge:P[,R[,1-H[,1-K]]]` (Gilbert-Elliott, netem order and
/// defaults: R = 1-P, loss in bad = 100%, loss in good = 0%).
pub fn parse_loss(input: &str) -> Result<Loss, LinkError> {
    let s = input.trim();
    if let Some(rest) = s.strip_prefix("ge:").or_else(|| s.strip_prefix("GE:")) {
        let parts: Vec<&str> = rest.split(',').collect();
        if parts.is_empty() || parts.len() > 4 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(bad(
                "loss",
                input,
                "Gilbert-Elliott is ge:P,R,1-H,1-K, e.g. ge:1%,10%,70%,0%",
            ));
        }
        let v: Vec<f64> = parts
            .iter()
            .map(|p| parse_probability(p))
            .collect::<Result<_, _>>()?;
        let p = v[0];
        let r = v.get(1).copied().unwrap_or(1.0 - p);
        let loss_bad = v.get(2).copied().unwrap_or(1.0);
        let loss_good = v.get(3).copied().unwrap_or(0.0);
        return Ok(Loss::GilbertElliott {
            p,
            r,
            loss_bad,
            loss_good,
        });
    }
    let p = parse_probability(s)?;
    Ok(if p == 0.0 {
        Loss::None
    } else {
        Loss::Random(p)
    })
}

/// Parses `--queue`: `100p` (packets), `64KiB`/`100000` (bytes, any hxlab size), `unlimited`.
pub fn parse_queue(input: &str) -> Result<QueueLimit, LinkError> {
    let s = input.trim();
    if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") {
        return Ok(QueueLimit::Unlimited);
    }
    let limit = if let Some(n) = s.strip_suffix('p').or_else(|| s.strip_suffix("pkt")) {
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| bad("queue", input, "expected e.g. 100p or 64KiB"))?;
        QueueLimit::Packets(n)
    } else {
        let b = hxlab_core::parse_size(s).map_err(|e| LinkError::Config(format!("queue: {e}")))?;
        QueueLimit::Bytes(b as usize)
    };
    match limit {
        QueueLimit::Packets(0) | QueueLimit::Bytes(0) => {
            Err(bad("queue", input, "must hold at least one packet"))
        }
        QueueLimit::Packets(n) if n > 10_000_000 => {
            Err(bad("queue", input, "absurdly large (max 10000000p)"))
        }
        QueueLimit::Bytes(n) if n > 16 << 30 => {
            Err(bad("queue", input, "absurdly large (max 16GiB)"))
        }
        QueueLimit::Bytes(n) if n < 1500 => Err(bad(
            "queue",
            input,
            "must hold at least one 1500-byte packet",
        )),
        l => Ok(l),
    }
}

/// Parses `--aqm`.
pub fn parse_aqm(input: &str) -> Result<Aqm, LinkError> {
    match input.trim().to_ascii_lowercase().as_str() {
        "droptail" | "drop-tail" | "fifo" => Ok(Aqm::DropTail),
        "codel" => Ok(Aqm::Codel),
        _ => Err(bad("aqm", input, "expected droptail or codel")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pure_delay_is_only_a_constant_delay() {
        let base = DirectionConfig {
            delay: Duration::from_millis(20),
            ..DirectionConfig::default()
        };
        assert!(base.is_pure_delay());
        assert!(DirectionConfig::default().is_pure_delay());
        let not = [
            DirectionConfig {
                loss: Loss::Random(0.01),
                ..base.clone()
            },
            DirectionConfig {
                jitter: Duration::from_millis(1),
                ..base.clone()
            },
            DirectionConfig {
                server: Server::Rate(10_000_000),
                ..base.clone()
            },
            DirectionConfig {
                aqm: Aqm::Codel,
                ..base.clone()
            },
            DirectionConfig {
                queue: QueueLimit::Bytes(64 * 1024),
                ..base.clone()
            },
        ];
        for c in not {
            assert!(!c.is_pure_delay(), "{c:?}");
        }
        for q in [
            QueueLimit::Unlimited,
            QueueLimit::Packets(1),
            QueueLimit::Bytes(1 << 20),
        ] {
            assert!(DirectionConfig {
                queue: q,
                ..base.clone()
            }
            .is_pure_delay());
        }
    }

    #[test]
    fn delay_and_loss_is_a_pure_delay_that_may_lose() {
        let base = DirectionConfig {
            delay: Duration::from_millis(5),
            ..DirectionConfig::default()
        };
        for loss in [
            Loss::None,
            Loss::Random(0.01),
            parse_loss("ge:1%,10%,70%,0.1%").unwrap(),
        ] {
            let c = DirectionConfig {
                loss,
                ..base.clone()
            };
            assert!(c.is_delay_and_loss(), "{c:?}");
            assert_eq!(c.is_pure_delay(), loss == Loss::None, "{c:?}");
        }
        let lossy = DirectionConfig {
            loss: Loss::Random(0.01),
            ..base.clone()
        };
        let not = [
            DirectionConfig {
                jitter: Duration::from_millis(1),
                ..lossy.clone()
            },
            DirectionConfig {
                server: Server::Rate(10_000_000),
                ..lossy.clone()
            },
            DirectionConfig {
                aqm: Aqm::Codel,
                ..lossy.clone()
            },
            DirectionConfig {
                queue: QueueLimit::Bytes(64 * 1024),
                ..lossy.clone()
            },
        ];
        for c in not {
            assert!(!c.is_delay_and_loss(), "{c:?}");
        }
    }

    use super::*;

    #[test]
    fn loss_forms() {
        assert_eq!(parse_loss("1%").unwrap(), Loss::Random(0.01));
        assert_eq!(parse_loss("0.02").unwrap(), Loss::Random(0.02));
        assert_eq!(parse_loss("0%").unwrap(), Loss::None);
        assert_eq!(
            parse_loss("ge:1%,10%,70%,0.1%").unwrap(),
            Loss::GilbertElliott {
                p: 0.01,
                r: 0.1,
                loss_bad: 0.7,
                loss_good: 0.001
            }
        );
        assert_eq!(
            parse_loss("ge:5%").unwrap(),
            Loss::GilbertElliott {
                p: 0.05,
                r: 0.95,
                loss_bad: 1.0,
                loss_good: 0.0
            }
        );
        for bad in [
            "-1%",
            "101%",
            "x",
            "ge:",
            "ge:1%,,2%",
            "ge:1,2,3,4,5",
            "1.5",
            "nan",
        ] {
            assert!(parse_loss(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validate_refuses_out_of_bounds_links() {
        assert!(LinkConfig::default().validate().is_ok());
        assert!(LinkConfig::from_profile("wpt:Cable")
            .unwrap()
            .validate()
            .is_ok());
        let mut slow = LinkConfig::default();
        slow.down.server = Server::Rate(1);
        let e = slow.validate().unwrap_err().to_string();
        assert!(e.contains("downlink") && e.contains("1kbit"), "{e}");
        let mut far = LinkConfig::default().with_delay(MAX_DELAY + Duration::from_millis(1));
        assert!(far.validate().is_err());
        far = LinkConfig::default();
        far.up.jitter = Duration::from_secs(3600);
        assert!(far
            .validate()
            .unwrap_err()
            .to_string()
            .contains("uplink jitter"));
        let mut lossy = LinkConfig::default();
        lossy.up.loss = Loss::Random(1.5);
        assert!(lossy.validate().is_err());
        lossy.up.loss = Loss::GilbertElliott {
            p: 0.1,
            r: f64::NAN,
            loss_bad: 1.0,
            loss_good: 0.0,
        };
        assert!(lossy.validate().is_err());
        let mut tiny = LinkConfig::default();
        tiny.down.queue = QueueLimit::Bytes(100);
        assert!(tiny.validate().is_err());
        tiny.down.queue = QueueLimit::Unlimited;
        assert!(tiny.validate().is_ok());
    }

    #[test]
    fn json_form_round_trips_and_is_validated() {
        let mut cfg = LinkConfig::from_profile("wpt:Cable")
            .unwrap()
            .with_delay(Duration::from_micros(20_500));
        cfg.seed = 7;
        cfg.up.loss = Loss::GilbertElliott {
            p: 0.01,
            r: 0.1,
            loss_bad: 0.7,
            loss_good: 0.0,
        };
        cfg.down.queue = QueueLimit::Bytes(65536);
        cfg.down.aqm = Aqm::Codel;
        let text = cfg.to_json().unwrap();
        assert_eq!(LinkConfig::from_json(&text).unwrap(), cfg);
        let d = LinkConfig::from_json(r#"{"seed": 3}"#).unwrap();
        assert_eq!(
            d,
            LinkConfig {
                seed: 3,
                ..LinkConfig::default()
            }
        );
        let e = LinkConfig::from_json(r#"{"down": {"server": {"rate": 1}}}"#).unwrap_err();
        assert!(e.to_string().contains("1kbit"), "{e}");
        assert!(LinkConfig::from_json(r#"{"dwon": {}}"#).is_err());
        let mut traced = LinkConfig::default();
        traced.down.server = Server::Trace(Arc::new(Trace::parse("1\n", "t").unwrap()));
        assert!(traced.to_json().is_err());
    }

    #[test]
    fn queue_forms() {
        assert_eq!(parse_queue("100p").unwrap(), QueueLimit::Packets(100));
        assert_eq!(parse_queue("64KiB").unwrap(), QueueLimit::Bytes(65536));
        assert_eq!(parse_queue("unlimited").unwrap(), QueueLimit::Unlimited);
        for bad in ["0p", "-3p", "10", "p", "99999999999p", "1TiB"] {
            assert!(parse_queue(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_aqm("CoDel").unwrap(), Aqm::Codel);
        assert!(parse_aqm("red").is_err());
    }
}
