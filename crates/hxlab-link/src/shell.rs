//! The driver around the model: a network namespace, two TUN devices and a relay.
//!
//! ```text
//!  outside netns (where hxlab started)            new netns ("inside")
//!  HOST 100.64.x.1 ── tun hxlab-o-N ──┐       ┌── tun hxlab-i-N ── CLIENT 100.64.x.2
//!                                     └─relay─┘   (default route, lo up, COMMAND runs here)
//! ```
//! Each direction has its own relay thread (read one TUN in batches, feed its [`Pipe`], write
//! due packets to the other TUN, sleep in epoll on the TUN, a timerfd and a stop eventfd), so
//! the two directions never contend and nothing busy-polls. Buffers come from a per-thread
//! pool bounded in bytes, so the steady state allocates nothing per packet.
//!
//! The TUN devices take TCP/UDP segmentation offload (see `tun`): the kernel hands the relay
//! 64 KiB super-packets, which a pure-delay direction carries whole, a direction of delay and
//! loss carries whole between lost segments, and any other direction cuts into ≤ 1500-byte
//! wire packets before its impairments (see `relay` and [`crate::gso`]).
//!
//! [`Pipe`]: crate::model::Pipe
//!
//! The namespace reaches whatever this side reaches: OUTER forwards (a setting of that
//! device only) and the link's own nftables table masquerades the CLIENT's packets and
//! brings replies back (see [`crate::nft`]); [`Link::expose`] makes servers bound to
//! 127.0.0.1 here reachable at HOST.
//!
//! Cleanup leans on the kernel: TUN devices are not persistent (they vanish with their fd,
//! and their per-device settings with them), the nftables table is owned by a netlink
//! socket (it vanishes when the socket closes), the namespace is held only by an fd and the
//! processes in it, commands get `PR_SET_PDEATHSIG(SIGKILL)`, and the /30 a link uses is
//! claimed with an abstract unix socket that the kernel releases when hxlab dies.

use crate::model::{Direction, DirectionStats, Pipe};
use crate::nft::Table;
use crate::relay::{relay, Carry, RelayCtx};
use crate::sys::{cvt, monotonic_ns, os_err};
use crate::tun::{open_tun, tun_open_error, Pool};
use crate::{LinkConfig, LinkError, LinkStats};
use std::ffi::CString;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// MTU of both TUN devices, like Ethernet (a larger one would make the link look faster than
/// any real path).
pub const MTU: usize = 1500;
/// How many /30 slots of 100.64.0.0/10 instances may use (4 addresses each).
const SLOTS: u32 = 16384;

/// Runs `ip ARGS` (iproute2) in the calling thread's network namespace.
fn ip(args: &[&str]) -> Result<(), LinkError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| LinkError::Setup(format!("running `ip` (install iproute2): {e}")))?;
    if !out.status.success() {
        return Err(LinkError::Setup(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// A claimed /30: the abstract socket keeps others away until it is closed (or hxlab dies).
struct Slot {
    index: u32,
    _claim: OwnedFd,
}

impl Slot {
    fn host(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + self.index * 4 + 1)
    }
    fn client(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + self.index * 4 + 2)
    }
}

/// Addresses already configured on any interface here, so we never reuse someone's /30.
fn addresses_in_use() -> Vec<Ipv4Addr> {
    let mut v = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            for sa in [a.address, a.destination].into_iter().flatten() {
                if let Some(sin) = sa.as_sockaddr_in() {
                    v.push(sin.ip());
                }
            }
        }
    }
    v
}

fn claim_slot() -> Result<Slot, LinkError> {
    let in_use = addresses_in_use();
    // Start at a pid-dependent slot so parallel starts rarely race for the same one.
    let start = (std::process::id().wrapping_mul(2654435761) >> 8) % SLOTS;
    for k in 0..SLOTS {
        let index = (start + k) % SLOTS;
        let base = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + index * 4;
        if in_use.iter().any(|a| (u32::from(*a) & !3) == base) {
            continue;
        }
        // SAFETY: plain socket call, fd checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(os_err("socket(AF_UNIX)"));
        }
        // SAFETY: fd is fresh and owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = format!("hxlab-link-slot-{index}");
        // SAFETY: sockaddr_un is plain old data; zeroed is valid.
        let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        // Abstract namespace: leading NUL, nothing on the file system to clean up.
        for (i, b) in name.bytes().enumerate() {
            sa.sun_path[i + 1] = b as libc::c_char;
        }
        let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
        // SAFETY: sa is initialised and len covers the used part.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            )
        };
        if r == 0 {
            return Ok(Slot { index, _claim: fd });
        }
    }
    Err(LinkError::Setup(
        "no free /30 in 100.64.0.0/10 for another link".into(),
    ))
}

/// The outside TUN device `name`, up, with HOST and CLIENT as its point-to-point pair.
fn outside_device(name: &str, host: Ipv4Addr, client: Ipv4Addr) -> Result<OwnedFd, LinkError> {
    let (outer, _) = open_tun(name)?;
    // No IPv6 link-local address: its router solicitations would be noise on the link.
    let _ = ip(&["link", "set", "dev", name, "addrgenmode", "none"]);
    ip(&["link", "set", "dev", name, "mtu", &MTU.to_string(), "up"])?;
    ip(&[
        "addr",
        "add",
        &host.to_string(),
        "peer",
        &format!("{client}/32"),
        "dev",
        name,
    ])?;
    Ok(outer)
}

/// A new network namespace with the inside TUN device `name` (CLIENT, HOST its peer, the
/// default route) and loopback up: the namespace's fd and the device's.
fn inside_namespace(
    name: &str,
    host: Ipv4Addr,
    client: Ipv4Addr,
) -> Result<(OwnedFd, OwnedFd), LinkError> {
    // Network namespaces are per thread: this thread moves into a new one, creates the
    // inner TUN there and configures it with `ip` children (which inherit the thread's
    // namespace), then hands back the namespace fd and the TUN fd and exits.
    let name = name.to_string();
    std::thread::Builder::new()
        .name("hxlab-link-setup".into())
        .spawn(move || -> Result<(OwnedFd, OwnedFd), LinkError> {
            // SAFETY: unshare affects only this thread's namespaces.
            cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) }, "unshare(CLONE_NEWNET)").map_err(|e| {
                LinkError::Permission(format!("{e}; creating a network namespace needs root (CAP_SYS_ADMIN): run `sudo hxlab link ...`"))
            })?;
            let p = CString::new("/proc/thread-self/ns/net").map_err(|_| LinkError::Setup("path".into()))?;
            // SAFETY: valid path; fd checked.
            let ns = cvt(unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }, "open netns")?;
            // SAFETY: fresh fd.
            let ns = unsafe { OwnedFd::from_raw_fd(ns) };
            let (inner, _) = open_tun(&name)?;
            ip(&["link", "set", "dev", "lo", "up"])?;
            let _ = ip(&["link", "set", "dev", &name, "addrgenmode", "none"]);
            ip(&["link", "set", "dev", &name, "mtu", &MTU.to_string(), "up"])?;
            ip(&["addr", "add", &client.to_string(), "peer", &format!("{host}/32"), "dev", &name])?;
            ip(&["route", "add", "default", "dev", &name])?;
            Ok((ns, inner))
        })
        .map_err(|e| LinkError::Setup(format!("spawn setup thread: {e}")))?
        .join()
        .map_err(|_| LinkError::Setup("setup thread panicked".into()))?
}

/// A running link: namespace, TUN devices and relay threads. Stop it with [`Link::stop`]
/// (dropping it also tears everything down, without returning the counters).
pub struct Link {
    slot: Slot,
    netns: Arc<OwnedFd>,
    stops: Vec<Arc<OwnedFd>>,
    relays: Vec<(Direction, JoinHandle<Result<DirectionStats, LinkError>>)>,
    outer_name: String,
    inner_name: String,
    /// The nftables table that gives the namespace the host's reach, or why there is none.
    reach: Result<std::sync::Mutex<Table>, String>,
    /// The resolv.conf commands inside see, when not this side's own.
    resolv: Option<ResolvConf>,
}

/// A resolv.conf of the link's own, bind-mounted over /etc/resolv.conf for its commands,
/// removed when the link goes. (The kernel refuses to bind-mount an unlinked file, so a
/// SIGKILL leaves this one small file in the temporary directory.)
struct ResolvConf {
    path: std::path::PathBuf,
    c_path: CString,
}

impl ResolvConf {
    fn write(slot: u32, text: &str) -> Result<ResolvConf, LinkError> {
        let path = std::env::temp_dir().join(format!(
            "hxlab-link-{}-{slot}-resolv.conf",
            std::process::id()
        ));
        std::fs::write(&path, text)
            .map_err(|e| LinkError::Setup(format!("writing {}: {e}", path.display())))?;
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| LinkError::Setup("resolv.conf path".into()))?;
        Ok(ResolvConf { path, c_path })
    }
}

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// True when a UDP socket of this network namespace is bound to the wildcard address
/// (0.0.0.0 or ::) on `port` (from /proc/net/udp and udp6).
fn udp_wildcard_listener(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|local| local.strip_suffix(&suffix))
                    .is_some_and(|addr| addr.bytes().all(|b| b == b'0'))
            })
        })
    })
}

/// Writes `net.ipv4.conf.DEV.KEY` (a setting of that device alone).
fn set_dev_sysctl(dev: &str, key: &str, value: &str) -> Result<(), LinkError> {
    let path = format!("/proc/sys/net/ipv4/conf/{dev}/{key}");
    std::fs::write(&path, value).map_err(|e| LinkError::Setup(format!("writing {path}: {e}")))
}

/// The namespace's way out (see [`crate::nft`]): forwarding on OUTER only, and the link's
/// own nftables table.
fn start_reach(
    outer: &str,
    slot: u32,
    host: Ipv4Addr,
    client: Ipv4Addr,
) -> Result<std::sync::Mutex<Table>, String> {
    let c = CString::new(outer).map_err(|_| "device name".to_string())?;
    // SAFETY: valid C string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(format!("{outer}: {}", std::io::Error::last_os_error()));
    }
    let table = Table::create(&format!("hxlab-link-{slot}"), host, client, index)
        .map_err(|e| e.to_string())?;
    set_dev_sysctl(outer, "forwarding", "1").map_err(|e| e.to_string())?;
    Ok(std::sync::Mutex::new(table))
}

impl Link {
    /// Creates the namespace, both TUN devices and the relay threads. Needs root (or
    /// CAP_NET_ADMIN + CAP_SYS_ADMIN); otherwise [`LinkError::Permission`] says how to fix it.
    pub fn start(cfg: LinkConfig) -> Result<Link, LinkError> {
        Link::start_capturing(cfg, None)
    }

    /// [`Link::start`], writing what crosses the link (and what it drops) to `pcap` as
    /// pcapng (see [`crate::pcap`]), with the key log named by `SSLKEYLOGFILE` embedded.
    pub fn start_capturing(
        cfg: LinkConfig,
        pcap: Option<&std::path::Path>,
    ) -> Result<Link, LinkError> {
        cfg.validate()?;
        let slot = claim_slot()?;
        let outer_name = format!("hxlab-o-{}", slot.index);
        let inner_name = format!("hxlab-i-{}", slot.index);
        let (host, client) = (slot.host(), slot.client());

        let outer = outside_device(&outer_name, host, client)?;
        let reach = start_reach(&outer_name, slot.index, host, client);

        let (netns, inner) = inside_namespace(&inner_name, host, client)?;

        let outer = Arc::new(outer);
        let inner = Arc::new(inner);
        let start_ns = monotonic_ns();
        let capture = match pcap {
            Some(path) => {
                let keylog = std::env::var_os("SSLKEYLOGFILE").map(std::path::PathBuf::from);
                Some(Arc::new(std::sync::Mutex::new(
                    crate::pcap::Capture::create(path, start_ns, keylog)?,
                )))
            }
            None => None,
        };
        let mut stops = Vec::new();
        let mut relays = Vec::new();
        for (dir, dcfg, rx, tx) in [
            (Direction::Down, &cfg.down, outer.clone(), inner.clone()),
            (Direction::Up, &cfg.up, inner.clone(), outer.clone()),
        ] {
            // SAFETY: plain syscall, fd checked.
            let stop = cvt(
                unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) },
                "eventfd",
            )?;
            // SAFETY: fresh fd.
            let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(stop) });
            stops.push(stop.clone());
            let mut pipe = Pipe::new(dcfg, crate::model::direction_seed(cfg.seed, dir));
            if capture.is_some() {
                pipe.keep_dropped();
            }
            let ctx = RelayCtx {
                dir,
                pipe,
                capture: capture.clone(),
                carry: Carry::for_direction(dcfg),
                lost: Vec::new(),
                pool: Pool::default(),
                rx,
                tx,
                stop,
                start_ns,
                realtime: std::env::var_os("HXLAB_LINK_NO_RT").is_none(),
                linger: (2 * (dcfg.delay + dcfg.jitter) + Duration::from_millis(200))
                    .min(Duration::from_secs(2)),
            };
            let name = format!(
                "hxlab-link-{}",
                if dir == Direction::Down { "down" } else { "up" }
            );
            let h = std::thread::Builder::new()
                .name(name)
                .spawn(move || relay(ctx))
                .map_err(|e| LinkError::Setup(format!("spawn relay thread: {e}")))?;
            relays.push((dir, h));
        }
        let mut link = Link {
            slot,
            netns: Arc::new(netns),
            stops,
            relays,
            outer_name,
            inner_name,
            reach,
            resolv: None,
        };
        link.resolv = link.host_resolvers()?;
        Ok(link)
    }

    /// Why the namespace cannot reach hosts beyond this machine, if it cannot (the link
    /// itself works either way): no nf_tables, or no right to use it (rootless mode).
    pub fn reach_error(&self) -> Option<&str> {
        self.reach.as_ref().err().map(|s| s.as_str())
    }

    /// Makes a server on this side listening on `to`:`port` (e.g. one bound to 127.0.0.1
    /// only) reachable from inside at [`Link::host_addr`]:`port`, TCP and UDP. Nothing
    /// outside the link's namespace gets to it this way.
    pub fn expose(&self, port: u16, to: Ipv4Addr) -> Result<(), LinkError> {
        let reach = self
            .reach
            .as_ref()
            .map_err(|e| LinkError::Setup(format!("cannot expose port {port} to the link: {e}")))?;
        // Packets for 127/8 are taken from OUTER only with route_localnet on it (a setting
        // of that device only, gone with it).
        if to.is_loopback() {
            set_dev_sysctl(&self.outer_name, "route_localnet", "1")?;
        }
        let mut table = reach.lock().unwrap_or_else(|p| p.into_inner());
        // A UDP socket on the wildcard address already takes HOST:port, and one that
        // answers from the routed source (no IP_PKTINFO) would answer from HOST, not from
        // `to`: conntrack would then remap its port and the client drop the answers. Only
        // TCP is translated then (an accepted TCP socket answers from the address it was
        // reached at).
        let udp = !udp_wildcard_listener(port);
        table.expose(port, to, udp)
    }

    /// Commands inside resolve names with `servers` (their /etc/resolv.conf names them
    /// instead of this side's). Without this call they use this side's resolvers, a resolver
    /// on 127.0.0.0/8 (systemd-resolved, dnsmasq) reached at [`Link::host_addr`].
    pub fn use_dns(&mut self, servers: &[Ipv4Addr]) -> Result<(), LinkError> {
        let text: String = servers
            .iter()
            .map(|s| format!("nameserver {s}\n"))
            .collect();
        self.resolv = Some(ResolvConf::write(self.slot.index, &text)?);
        Ok(())
    }

    /// The resolv.conf commands inside get when this side's names a loopback resolver: the
    /// same servers, a loopback one replaced by HOST (and exposed there). None when this
    /// side's works as it is.
    fn host_resolvers(&self) -> Result<Option<ResolvConf>, LinkError> {
        let Ok(text) = std::fs::read_to_string("/etc/resolv.conf") else {
            return Ok(None);
        };
        let mut loopback = None;
        let mut out = String::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            if let (Some("nameserver"), Some(addr)) = (words.next(), words.next()) {
                if let Ok(a) = addr.parse::<Ipv4Addr>() {
                    if a.is_loopback() {
                        if loopback.is_none() {
                            loopback = Some(a);
                            out.push_str(&format!("nameserver {}\n", self.host_addr()));
                        }
                        continue;
                    }
                }
            }
            out.push_str(line);
            out.push('\n');
        }
        let Some(lo) = loopback else {
            return Ok(None);
        };
        if self.reach.is_err() {
            return Ok(None);
        }
        self.expose(53, lo)?;
        Ok(Some(ResolvConf::write(self.slot.index, &out)?))
    }

    /// The outside end's address (where servers outside are reached from inside).
    pub fn host_addr(&self) -> Ipv4Addr {
        self.slot.host()
    }

    /// The inside end's address.
    pub fn client_addr(&self) -> Ipv4Addr {
        self.slot.client()
    }

    /// Names of the outside and inside TUN devices.
    pub fn device_names(&self) -> (&str, &str) {
        (&self.outer_name, &self.inner_name)
    }

    /// A command that runs inside the namespace, with `HXLAB_LINK_HOST`/`HXLAB_LINK_CLIENT`
    /// set, in a PID namespace of its own (see [`enter_pid_namespace`]): it dies with the
    /// thread that spawned it, and so does everything it started, even when hxlab is killed
    /// with SIGKILL (spawn it from a thread that lives as long as the command should). The
    /// Link must outlive the spawn. Its exit status is the command's, a death by signal N
    /// reported as exit code 128 + N.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("HXLAB_LINK_HOST", self.host_addr().to_string());
        c.env("HXLAB_LINK_CLIENT", self.client_addr().to_string());
        let ns = self.netns.as_raw_fd();
        let resolv = self.resolv.as_ref().map(|r| r.c_path.clone());
        // SAFETY: the closure only makes async-signal-safe syscalls between fork and exec.
        unsafe {
            c.pre_exec(move || {
                if libc::setns(ns, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(path) = &resolv {
                    bind_resolv_conf(path)?;
                }
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                enter_pid_namespace()
            });
        }
        c
    }

    /// Runs `f` on a new thread that has entered the namespace (for in-process clients):
    /// sockets it creates live inside, on the CLIENT side.
    pub fn spawn_inside<T, F>(&self, f: F) -> std::io::Result<JoinHandle<std::io::Result<T>>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let ns = self.netns.clone();
        std::thread::Builder::new()
            .name("hxlab-link-inside".into())
            .spawn(move || {
                // SAFETY: setns affects only this thread; the fd is kept alive by the Arc.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(f())
            })
    }

    /// Runs `cmd` (built with [`Link::command`]) to completion, forwarding SIGINT and SIGTERM
    /// that hxlab receives to it meanwhile, and returns its status.
    pub fn run(&self, cmd: &mut Command) -> std::io::Result<ExitStatus> {
        // Installed before the spawn: a signal that comes while the command starts is held
        // and passed on once it has a PID (else it would end hxlab with the command running).
        let forward = SignalForward::install();
        let mut child = cmd.spawn()?;
        forward.target(child.id() as libc::pid_t);
        loop {
            match child.wait() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// Stops the relay and returns the counters. Any process still in the namespace (children
    /// COMMAND left behind) is killed, so the namespace goes away with the TUN devices.
    pub fn stop(mut self) -> LinkStats {
        self.shutdown()
    }

    fn shutdown(&mut self) -> LinkStats {
        kill_namespace_members(&self.netns);
        for s in &self.stops {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes to an eventfd.
            unsafe { libc::write(s.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        }
        let mut stats = LinkStats::default();
        for (dir, h) in self.relays.drain(..) {
            if let Ok(Ok(s)) = h.join() {
                match dir {
                    Direction::Down => stats.down = s,
                    Direction::Up => stats.up = s,
                }
            }
        }
        stats
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if !self.relays.is_empty() {
            self.shutdown();
        }
    }
}

/// SIGKILLs every process whose network namespace is `ns` (never ourselves).
fn kill_namespace_members(ns: &OwnedFd) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: fstat into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(ns.as_raw_fd(), &mut st) } != 0 {
        return;
    }
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(m) = std::fs::metadata(format!("/proc/{pid}/ns/net")) {
            if m.ino() == st.st_ino && m.dev() == st.st_dev {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

/// Called between fork and exec (async-signal-safe calls only, no allocation): gives the
/// command a mount namespace of its own where `path` is its /etc/resolv.conf.
unsafe fn bind_resolv_conf(path: &CString) -> std::io::Result<()> {
    if libc::unshare(libc::CLONE_NEWNS) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Mounts made here must not propagate back to the namespace we came from.
    if libc::mount(
        c"none".as_ptr(),
        c"/".as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_SLAVE,
        std::ptr::null(),
    ) != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    if libc::mount(
        path.as_ptr(),
        c"/etc/resolv.conf".as_ptr(),
        std::ptr::null(),
        libc::MS_BIND,
        std::ptr::null(),
    ) != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Called between fork and exec (async-signal-safe calls only, no allocation): puts the
/// command in a new PID namespace so nothing it starts outlives the link.
///
/// ```text
/// hxlab ── intermediary (the spawned Child; PDEATHSIG: dies with hxlab's thread)
///             └── init, PID 1 of the new namespace (PDEATHSIG: dies with the intermediary)
///                    └── the command, PID 2 (returns from here and is exec'd)
/// ```
/// The intermediary and init pass SIGINT/SIGTERM/SIGHUP down, reap, and exit with the
/// command's status once it exits; when init exits — or is killed because hxlab was — the
/// kernel kills every process left in the namespace (a command's `sleep 97 &` included).
/// Both close every descriptor above stderr, so the exec-status pipe of `Command::spawn` is
/// held only by the command, as it expects.
unsafe fn enter_pid_namespace() -> std::io::Result<()> {
    if libc::unshare(libc::CLONE_NEWPID) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let init = libc::fork();
    if init < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if init > 0 {
        relay_until_exit(init, false);
    }
    if libc::prctl(
        libc::PR_SET_PDEATHSIG,
        libc::SIGKILL as libc::c_ulong,
        0,
        0,
        0,
    ) != 0
    {
        libc::_exit(127);
    }
    let command = libc::fork();
    if command < 0 {
        libc::_exit(127);
    }
    if command == 0 {
        return Ok(());
    }
    relay_until_exit(command, true)
}

/// Passes signals on to `child` and exits as it exits (reaping any other process when
/// `reap_all`: init adopts orphans). Never returns.
unsafe fn relay_until_exit(child: libc::pid_t, reap_all: bool) -> ! {
    FORWARD_PID.store(child, std::sync::atomic::Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = forward_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
    if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
        for fd in 3..4096 {
            libc::close(fd);
        }
    }
    loop {
        let mut status = 0;
        let target = if reap_all { -1 } else { child };
        let pid = libc::waitpid(target, &mut status, 0);
        if pid == child {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                1
            };
            libc::_exit(code);
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            libc::_exit(1);
        }
    }
}

static FORWARD_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// A signal that came before the command had a PID (0: none).
static PENDING_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = FORWARD_PID.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING_SIGNAL.store(sig, std::sync::atomic::Ordering::SeqCst);
    }
}

/// While alive, SIGINT/SIGTERM/SIGHUP to hxlab are passed on to the command; one that comes
/// before the command has a PID ([`SignalForward::target`]) is held until then.
struct SignalForward {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalForward {
    /// Passes signals on to `pid` from now on, and the one held meanwhile, if any.
    fn target(&self, pid: libc::pid_t) {
        FORWARD_PID.store(pid, std::sync::atomic::Ordering::SeqCst);
        let held = PENDING_SIGNAL.swap(0, std::sync::atomic::Ordering::SeqCst);
        if held != 0 {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(pid, held) };
        }
    }

    fn install() -> SignalForward {
        FORWARD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        PENDING_SIGNAL.store(0, std::sync::atomic::Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction structs are plain data; the handler only calls kill.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = forward_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        SignalForward { old }
    }
}

impl Drop for SignalForward {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores the previous disposition.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        FORWARD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        // Held and never passed on (the command did not start): it is ours after all.
        let held = PENDING_SIGNAL.swap(0, std::sync::atomic::Ordering::SeqCst);
        if held != 0 {
            // SAFETY: raise has no memory preconditions.
            unsafe { libc::raise(held) };
        }
    }
}

/// True when this process is root (then no user namespace is needed).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Checks that /dev/net/tun can be opened by this user, with the fix in the error if not.
pub fn check_tun_access() -> Result<(), LinkError> {
    let path = CString::new("/dev/net/tun").map_err(|_| LinkError::Setup("tun path".into()))?;
    // SAFETY: valid path; the fd is closed right away.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(tun_open_error(std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just opened here.
    unsafe { libc::close(fd) };
    Ok(())
}

/// Rootless mode: moves the whole process into a new user namespace (where it is root) and a
/// new network namespace with loopback up, so [`Link::start`] can create its devices without
/// privileges. Both ends of the link then live in namespaces of this process: the "outside"
/// is reachable only from servers this process (or its children) start. Must be called while
/// the process is single-threaded (the kernel refuses otherwise).
pub fn enter_user_namespace() -> Result<(), LinkError> {
    check_tun_access()?;
    // SAFETY: plain syscalls.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: unshare affects this (single-threaded) process.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(LinkError::Permission(format!(
            "cannot create an unprivileged user namespace ({e}); enable them (`sudo sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=10000`) or run hxlab link as root"
        )));
    }
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| LinkError::Setup(format!("writing {file}: {e}")))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    ip(&["link", "set", "dev", "lo", "up"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A SIGTERM that comes after the forwarding is installed but before the command has a
    /// PID is held, and passed on once it has one (it neither ends us nor is lost).
    #[test]
    fn a_signal_before_the_command_has_a_pid_reaches_it_once_it_has_one() {
        let forward = SignalForward::install();
        // SAFETY: raise has no memory preconditions; the handler installed above takes it.
        unsafe { libc::raise(libc::SIGTERM) };
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        forward.target(child.id() as libc::pid_t);
        let status = child.wait().expect("wait for sleep");
        drop(forward);
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    }
}
