//! How an origin decides what to send next, as factors the lab can set on every protocol:
//! the response scheduler ([`Scheduler`]: how responses share one connection) and the TCP
//! send low-water mark ([`Lowat`]: how much the kernel may hold unsent, `TCP_NOTSENT_LOWAT`),
//! with the read-back of what a socket actually runs. The scheduler itself is hxlab-serve's
//! `schedule` module; docs/priorities.md says why both matter.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;

/// How responses share a connection (HTTP/2 and HTTP/3; HTTP/1.1 sends one response at a
/// time whatever is chosen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheduler {
    /// RFC 9218: urgency first; within one urgency non-incremental responses one at a time
    /// in request order, then incremental ones in turn.
    #[default]
    Rfc9218,
    /// Every response in turn, priorities ignored.
    RoundRobin,
    /// One response at a time in request order, priorities ignored.
    Fifo,
}

impl Scheduler {
    /// Every scheduler, in the order the docs list them.
    pub const ALL: [Scheduler; 3] = [Scheduler::Rfc9218, Scheduler::RoundRobin, Scheduler::Fifo];

    /// The name `--scheduler` takes and the records show.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Rfc9218 => "rfc9218",
            Scheduler::RoundRobin => "round-robin",
            Scheduler::Fifo => "fifo",
        }
    }

    /// The scheduler called `name`; the error is one line for the user.
    pub fn parse(name: &str) -> Result<Scheduler, String> {
        Scheduler::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("unknown scheduler {name:?}: use rfc9218, round-robin or fifo"))
    }
}

impl std::fmt::Display for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scheduler::parse(s)
    }
}

impl serde::Serialize for Scheduler {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Scheduler {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Scheduler::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The TCP send low-water mark (`TCP_NOTSENT_LOWAT`): the socket takes more only while it
/// holds fewer than this many bytes not yet sent, so what goes next is decided late.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lowat {
    /// Not set: the kernel's autotuned send buffer holds what it will (hundreds of KB).
    Off,
    /// At most about this many unsent bytes (plus one write) in the kernel.
    Bytes(u32),
}

/// The origin's default mark, chosen by measurement (docs/priorities.md, bench/priority.sh).
pub const DEFAULT_LOWAT: Lowat = Lowat::Bytes(16 << 10);

impl Default for Lowat {
    fn default() -> Lowat {
        DEFAULT_LOWAT
    }
}

impl Lowat {
    /// `off` or a size (`16KiB`, `16384`); at least 1 byte, below 2 GiB.
    pub fn parse(s: &str) -> Result<Lowat, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(Lowat::Off);
        }
        let n = crate::parse_size(s).map_err(|e| format!("{s:?}: {e} (or off)"))?;
        if n == 0 || n >= 1 << 31 {
            return Err(format!("{s:?}: use 1 byte to 2GiB, or off"));
        }
        Ok(Lowat::Bytes(n as u32))
    }

    /// `off`, or the size in bytes.
    pub fn name(self) -> String {
        match self {
            Lowat::Off => "off".to_string(),
            Lowat::Bytes(n) => n.to_string(),
        }
    }

    /// The mark in bytes, if set.
    pub fn bytes(self) -> Option<u32> {
        match self {
            Lowat::Off => None,
            Lowat::Bytes(n) => Some(n),
        }
    }
}

impl std::fmt::Display for Lowat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for Lowat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Lowat::parse(s)
    }
}

impl serde::Serialize for Lowat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Lowat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Text {
            N(u64),
            S(String),
        }
        let s = match Text::deserialize(d)? {
            Text::N(n) => n.to_string(),
            Text::S(s) => s,
        };
        Lowat::parse(&s).map_err(|e| serde::de::Error::custom(format!("notsent_lowat {e}")))
    }
}

/// What an origin's send path ran for the connections of one span (a cell of an experiment,
/// a page's runs), as the server read it back (`/stats`): never the setting echoed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Scheduling {
    /// The scheduler in force on the server; None when it did not say.
    #[serde(default)]
    pub scheduler: Option<Scheduler>,
    /// Whether the span's protocol has responses to schedule: false for HTTP/1.1, whose
    /// connections carry one response at a time, so `scheduler` does not apply to them.
    pub scheduler_applies: bool,
    /// Connections by the `TCP_NOTSENT_LOWAT` read back from each socket (`"16384"`, `"off"`);
    /// empty for HTTP/3, which has no TCP socket.
    #[serde(default)]
    pub notsent_lowat: BTreeMap<String, u64>,
    /// Responses by the priority the server understood for them (`"u=3"`, `"u=0, i"`);
    /// empty for HTTP/1.1.
    #[serde(default)]
    pub priorities: BTreeMap<String, u64>,
}

impl Scheduling {
    /// Adds another span's counts (the repetitions of one cell). The scheduler is kept when
    /// both say the same, else None: a span whose repetitions ran different ones has none.
    pub fn add(&mut self, other: &Scheduling) {
        if self.scheduler != other.scheduler {
            self.scheduler = None;
        }
        self.scheduler_applies |= other.scheduler_applies;
        crate::cc::add_counts(&mut self.notsent_lowat, &other.notsent_lowat);
        crate::cc::add_counts(&mut self.priorities, &other.priorities);
    }

    /// The marks as a name when every connection ran one (`16384`, `off`), else the counts
    /// (`16384 3, off 1`); `-` when no connection was seen.
    pub fn lowat_text(&self) -> String {
        crate::cc::counts_text(&self.notsent_lowat)
    }
}

/// Sets `TCP_NOTSENT_LOWAT` on a TCP socket (a listener's accepted sockets inherit it).
/// `Off` sets nothing.
pub fn set_lowat(fd: RawFd, lowat: Lowat) -> io::Result<()> {
    match lowat {
        Lowat::Off => Ok(()),
        Lowat::Bytes(n) => crate::cc::set_tcp_int(fd, libc::TCP_NOTSENT_LOWAT, n as libc::c_int),
    }
}

/// The mark a TCP socket runs, read back: its own `TCP_NOTSENT_LOWAT`, or when it has none
/// (0) the namespace's `net.ipv4.tcp_notsent_lowat`; `Off` when that is the "unlimited"
/// value (4294967295, the kernel's default).
pub fn lowat_of(fd: RawFd) -> io::Result<Lowat> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes one c_int into `v` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let v = match v as u32 {
        0 => namespace_lowat(),
        v => u64::from(v),
    };
    Ok(if v >= 1 << 31 {
        Lowat::Off
    } else {
        Lowat::Bytes(v as u32)
    })
}

/// The namespace's `net.ipv4.tcp_notsent_lowat`, read once (it is read back for every
/// accepted socket that sets no mark of its own; the file is not read per connection).
fn namespace_lowat() -> u64 {
    static SYSCTL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SYSCTL.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_notsent_lowat")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(u64::from(u32::MAX))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn names_parse_back() {
        for s in Scheduler::ALL {
            assert_eq!(Scheduler::parse(s.name()), Ok(s));
        }
        assert!(Scheduler::parse("RFC9218").is_err());
        assert_eq!(Lowat::parse("off"), Ok(Lowat::Off));
        assert_eq!(Lowat::parse("16KiB"), Ok(Lowat::Bytes(16384)));
        assert_eq!(Lowat::parse("4096"), Ok(Lowat::Bytes(4096)));
        assert!(Lowat::parse("0").is_err());
        assert!(Lowat::parse("3GiB").is_err());
        assert!(Lowat::parse("lots").is_err());
        let j: Lowat = serde_json::from_str("8192").unwrap();
        assert_eq!(j, Lowat::Bytes(8192));
        let j: Lowat = serde_json::from_str("\"off\"").unwrap();
        assert_eq!(j, Lowat::Off);
        assert_eq!(serde_json::to_string(&Lowat::Bytes(5)).unwrap(), "\"5\"");
    }

    #[test]
    fn scheduling_round_trips_and_adds_up() {
        let one = Scheduling {
            scheduler: Some(Scheduler::Fifo),
            scheduler_applies: true,
            notsent_lowat: BTreeMap::from([("16384".to_string(), 1)]),
            priorities: BTreeMap::from([("u=3".to_string(), 30)]),
        };
        let text = serde_json::to_string(&one).unwrap();
        assert_eq!(
            text,
            r#"{"scheduler":"fifo","scheduler_applies":true,"notsent_lowat":{"16384":1},"priorities":{"u=3":30}}"#
        );
        assert_eq!(serde_json::from_str::<Scheduling>(&text).unwrap(), one);
        let mut sum = one.clone();
        sum.add(&one);
        assert_eq!(
            (sum.scheduler, sum.priorities["u=3"]),
            (Some(Scheduler::Fifo), 60)
        );
        assert_eq!(sum.lowat_text(), "16384");
        sum.add(&Scheduling {
            scheduler: Some(Scheduler::Rfc9218),
            ..one
        });
        assert_eq!(
            sum.scheduler, None,
            "repetitions that ran different schedulers"
        );
        let h1: Scheduling =
            serde_json::from_str(r#"{"scheduler":"rfc9218","scheduler_applies":false}"#).unwrap();
        assert!(!h1.scheduler_applies && h1.priorities.is_empty());
    }

    #[test]
    fn the_mark_is_read_back_from_the_socket_and_inherited_at_accept() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_lowat(l.as_raw_fd(), Lowat::Bytes(12345)).unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        assert_eq!(lowat_of(a.as_raw_fd()).unwrap(), Lowat::Bytes(12345));
        // The other end set nothing: the namespace's default (normally off).
        let sysctl = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_notsent_lowat").unwrap();
        let want = match sysctl.trim().parse::<u64>().unwrap() {
            v if v >= 1 << 31 => Lowat::Off,
            v => Lowat::Bytes(v as u32),
        };
        assert_eq!(lowat_of(c.as_raw_fd()).unwrap(), want);
    }
}
