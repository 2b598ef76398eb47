//! Congestion control, the same on both ends: the names users write, setting them on a TCP
//! socket, and reading back what a socket actually runs (a QUIC transport's side is
//! hxlab-quic's `cc`, on this same vocabulary).
//!
//! `hxlab serve` and `hxlab load` both go through here, so a `cc` factor means one thing on
//! either end and on every protocol, and what is recorded is read back from the kernel
//! (`getsockopt(TCP_CONGESTION)`) or from quinn's live controller — never echoed from a flag.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;

/// A congestion controller that both the kernel's TCP and quinn's QUIC offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CongestionControl {
    /// NewReno (TCP: `reno`; QUIC: quinn's NewReno).
    Reno,
    /// CUBIC (TCP: `cubic`; QUIC: quinn's Cubic).
    Cubic,
    /// BBR (TCP: the kernel's `bbr`, v1; QUIC: quinn's BBR).
    Bbr,
}

impl CongestionControl {
    /// Every controller, in a fixed order.
    pub const ALL: [CongestionControl; 3] = [
        CongestionControl::Reno,
        CongestionControl::Cubic,
        CongestionControl::Bbr,
    ];

    /// Parses `reno`, `newreno`, `cubic`, `bbr` (any case).
    pub fn parse(s: &str) -> Option<CongestionControl> {
        Some(match s.to_ascii_lowercase().as_str() {
            "reno" | "newreno" => CongestionControl::Reno,
            "cubic" => CongestionControl::Cubic,
            "bbr" => CongestionControl::Bbr,
            _ => return None,
        })
    }

    /// The Linux TCP_CONGESTION name, also used for QUIC in records.
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Reno => "reno",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
        }
    }

    /// Parses a name and checks that this kernel offers it for TCP
    /// (`/proc/sys/net/ipv4/tcp_available_congestion_control`). The error is one line for
    /// the user.
    pub fn parse_available(s: &str) -> Result<CongestionControl, String> {
        let cc = CongestionControl::parse(s)
            .ok_or_else(|| format!("congestion control {s:?}: use reno, cubic or bbr"))?;
        match tcp_available() {
            Ok(list) if !list.iter().any(|a| a == cc.name()) => Err(format!(
                "congestion control {}: this kernel offers only {} (see /proc/sys/net/ipv4/tcp_available_congestion_control; modprobe tcp_{} may add it)",
                cc.name(),
                list.join(", "),
                cc.name()
            )),
            _ => Ok(cc),
        }
    }
}

/// In JSON and TOML a controller is its name (`"bbr"`); `newreno` reads as `reno`.
impl serde::Serialize for CongestionControl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CongestionControl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CongestionControl::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("congestion control {s:?}: use reno, cubic or bbr"))
        })
    }
}

impl std::str::FromStr for CongestionControl {
    type Err = String;

    /// [`CongestionControl::parse_available`]: a name this kernel offers.
    fn from_str(s: &str) -> Result<Self, String> {
        CongestionControl::parse_available(s)
    }
}

impl std::fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The TCP congestion controllers this kernel offers now.
pub fn tcp_available() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")?;
    Ok(text.split_whitespace().map(str::to_string).collect())
}

/// Sets TCP_CONGESTION on a TCP socket (listening, connecting or connected).
pub fn set_tcp(fd: RawFd, cc: CongestionControl) -> io::Result<()> {
    let name = cc.name().as_bytes();
    // SAFETY: the option value is a byte string of the given length, as TCP_CONGESTION
    // expects; an invalid fd only makes the call fail.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The TCP congestion controllers a process without CAP_NET_ADMIN may set
/// (`net.ipv4.tcp_allowed_congestion_control`: the default and reno unless configured).
pub fn tcp_allowed() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")?;
    Ok(text.split_whitespace().map(str::to_string).collect())
}

/// Whether this process may set `cc` on its TCP sockets, asked of the kernel on a fresh
/// socket: without CAP_NET_ADMIN (a container, an unprivileged user) only the controllers
/// of `net.ipv4.tcp_allowed_congestion_control` may be set. The error is one line for the
/// user, with what to do.
pub fn settable(cc: CongestionControl) -> Result<(), String> {
    // SAFETY: a plain socket call; the descriptor is closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        // No socket to ask: the connections will say so themselves.
        return Ok(());
    }
    let set = set_tcp(fd, cc);
    // SAFETY: `fd` is the socket made above, closed once.
    unsafe { libc::close(fd) };
    match set {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(format!(
            "congestion control {}: this process may not set it on TCP sockets (without CAP_NET_ADMIN only net.ipv4.tcp_allowed_congestion_control may be set: {}); run with CAP_NET_ADMIN, add {} to that sysctl, or ask for --cc system",
            cc.name(),
            tcp_allowed().map_or_else(|_| "unreadable".into(), |l| l.join(" ")),
            cc.name()
        )),
        Err(e) => Err(format!("congestion control {}: {e}", cc.name())),
    }
}

/// The controller `hxlab load` runs when none is asked: cubic on every protocol. When this
/// process may not set cubic on TCP sockets ([`settable`]), the system's default instead,
/// on every protocol and in every run (an h3 run too, so it is compared with an h2 run
/// under the same controller), when it is one QUIC has too (else none is set: each stack's
/// own). The note says so when it is not cubic.
pub fn load_default() -> (Option<CongestionControl>, Option<String>) {
    let cubic = CongestionControl::Cubic;
    let Err(why) = settable(cubic) else {
        return (Some(cubic), None);
    };
    let system = system_default_name();
    let fallback = CongestionControl::parse(&system).filter(|c| settable(*c).is_ok());
    let then = match fallback {
        Some(c) => format!(
            "every protocol runs the system's default, {}, instead",
            c.name()
        ),
        None => format!("each stack runs its own default (TCP: {system})"),
    };
    (fallback, Some(format!("{why}; {then}")))
}

/// A controller as read back from a socket, by the kernel's own name for it. What is set is a
/// [`CongestionControl`]; what runs may be any controller the kernel has (the system default
/// can be one hxlab cannot set), so records count what ran by this name — never echoed from
/// a flag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Running(String);

impl Running {
    /// The kernel's name, e.g. `cubic`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Running {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Running {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Reads back the congestion controller a TCP socket runs (`getsockopt(TCP_CONGESTION)`).
pub fn tcp_of(fd: RawFd) -> io::Result<Running> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes = &buf[..(len as usize).min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(Running(String::from_utf8_lossy(&bytes[..end]).into_owned()))
}

/// TCP Fast Open read-back: true when this connection's SYN carried data that the peer
/// acknowledged (`TCP_INFO`'s `TCPI_OPT_SYN_DATA`). On the connecting side that means the
/// server accepted the data sent with the SYN; on the accepting side, that it took data from
/// the SYN. Valid once the handshake's SYN-ACK has been seen.
pub fn tcp_syn_data_acked(fd: RawFd) -> io::Result<bool> {
    // SAFETY: tcp_info is plain data; the kernel writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: as above; an invalid fd only makes the call fail.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // TCPI_OPT_SYN_DATA (linux/tcp.h).
    Ok(info.tcpi_options & 0x20 != 0)
}

/// Sets an integer TCP socket option (TCP_FASTOPEN's queue length, TCP_FASTOPEN_CONNECT).
pub fn set_tcp_int(fd: RawFd, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is one c_int, as these options expect.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            option,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `net.ipv4.tcp_fastopen` of this network namespace (bit 1: clients may use TFO, bit 2:
/// servers may accept it), if readable.
pub fn tcp_fastopen_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `net.ipv4.tcp_congestion_control` of this network namespace, as the kernel names it: the
/// controller a TCP socket gets when nothing sets one (`unknown` when unreadable). Any
/// controller the kernel has may be the default, not only those of [`CongestionControl`].
pub fn system_default_name() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Adds `b`'s per-controller connection counts to `a`.
pub fn add_counts(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// What grew from `before` to `after` in counts a server only adds to (connections per
/// controller, per mark, responses per priority): the counts of one span, without the keys
/// that did not grow.
pub fn counts_since(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n.saturating_sub(*before.get(k).unwrap_or(&0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Counts as people read them: `reno` when every connection ran reno, `bbr 3, cubic 1` when
/// they were mixed, `-` when none was seen.
pub fn counts_text(m: &BTreeMap<String, u64>) -> String {
    let seen: Vec<(&String, &u64)> = m.iter().filter(|(_, n)| **n > 0).collect();
    match seen.len() {
        0 => "-".into(),
        1 => seen[0].0.clone(),
        _ => seen
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn names_round_trip() {
        for cc in CongestionControl::ALL {
            assert_eq!(CongestionControl::parse(cc.name()), Some(cc));
        }
        assert_eq!(
            CongestionControl::parse("NewReno"),
            Some(CongestionControl::Reno)
        );
        assert_eq!(CongestionControl::parse("vegas"), None);
        assert!(CongestionControl::parse_available("vegas")
            .unwrap_err()
            .contains("use reno, cubic or bbr"));
    }

    #[test]
    fn set_then_read_back_on_a_socket() {
        let sock = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let avail = tcp_available().unwrap();
        for cc in CongestionControl::ALL {
            if !avail.iter().any(|a| a == cc.name()) {
                continue;
            }
            set_tcp(sock.as_raw_fd(), cc).unwrap();
            assert_eq!(tcp_of(sock.as_raw_fd()).unwrap(), cc.name());
        }
        assert!(avail.iter().any(|a| a == "reno"), "reno is always built in");
    }

    /// What the kernel lets this process set agrees with the allowed list (everything when
    /// privileged); the default is cubic exactly when cubic can be set.
    #[test]
    fn settable_follows_the_kernels_permission() {
        let allowed = tcp_allowed().unwrap();
        for cc in CongestionControl::ALL {
            let available = tcp_available().unwrap().iter().any(|a| a == cc.name());
            if !available {
                continue;
            }
            match settable(cc) {
                Ok(()) => {}
                Err(e) => {
                    assert!(!allowed.iter().any(|a| a == cc.name()), "{e}");
                    assert!(e.contains("--cc system"), "{e}");
                }
            }
        }
        let (cc, note) = load_default();
        assert_eq!(
            cc == Some(CongestionControl::Cubic),
            settable(CongestionControl::Cubic).is_ok()
        );
        assert_eq!(note.is_none(), cc == Some(CongestionControl::Cubic));
    }

    #[test]
    fn counts_read_as_one_name_or_a_list() {
        let mut m = BTreeMap::new();
        assert_eq!(counts_text(&m), "-");
        m.insert("reno".to_string(), 4);
        assert_eq!(counts_text(&m), "reno");
        let mut o = BTreeMap::new();
        o.insert("bbr".to_string(), 1);
        add_counts(&mut m, &o);
        assert_eq!(counts_text(&m), "bbr 1, reno 4");
        let before = BTreeMap::from([("reno".to_string(), 4), ("cubic".to_string(), 2)]);
        m.insert("cubic".to_string(), 2);
        assert_eq!(
            counts_since(&m, &before),
            BTreeMap::from([("bbr".to_string(), 1)]),
            "keys that did not grow are left out"
        );
    }
}
