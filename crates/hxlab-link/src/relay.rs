//! One direction's relay thread: read a TUN in batches, feed the [`Pipe`], write the packets
//! that are due to the other TUN, sleep in epoll on the TUN, a timerfd and a stop eventfd.
//!
//! Every read starts with a `virtio_net_hdr` (see [`crate::gso`] and [`crate::tun`]). What
//! enters the pipe depends on the direction's config:
//! * **pure delay** ([`DirectionConfig::is_pure_delay`]): a GSO super-packet enters whole,
//!   counted as its segments ([`Packet::segments`]) and their wire bytes, and is written out
//!   whole with its own vnet header, so the receiving stack gets it as one GSO packet, as
//!   from a NIC with GRO. This is exact: with nothing but a constant delay, the segments
//!   (which arrived together) would leave together, in order, anyway.
//! * **delay and loss** ([`DirectionConfig::is_delay_and_loss`]): each segment of a
//!   super-packet meets the loss stage on its own, in order ([`Pipe::ingress`]: the same draws
//!   and counts as if the segments had arrived one by one); when none is lost the super-packet
//!   goes on whole, otherwise each unbroken run of survivors is rebuilt as a smaller
//!   super-packet (one segment: an ordinary packet; [`Gso::write_run`]) and goes on as one
//!   unit ([`Pipe::on_survivor`]). Exact for the same reason as pure delay.
//! * **anything else** (jitter, a rate or trace, a byte queue, CoDel): a super-packet is
//!   cut into its wire packets here, before the pipe, so every impairment sees each
//!   ≤ 1500-byte packet on its own. Segments carry a partial checksum when the super-packet
//!   did (the receiving TUN accepts it), so the payload is copied once and never summed.
//!
//! Ordinary packets pass with their header unchanged either way (a `NEEDS_CSUM` flag stays
//! with its packet).
//!
//! [`DirectionConfig::is_pure_delay`]: crate::DirectionConfig::is_pure_delay
//! [`DirectionConfig::is_delay_and_loss`]: crate::DirectionConfig::is_delay_and_loss

use crate::gso::{Csum, Gso, VnetHdr, F_NEEDS_CSUM, VNET_HDR_LEN};
use crate::model::{Direction, DirectionStats, Pipe};
use crate::sys::{cvt, monotonic_ns};
use crate::tun::{Buf, Pool, SMALL_BUF};
use crate::LinkError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// Reads from a TUN per wakeup before the due deliveries are written (a super-packet is one
/// read).
const READ_BATCH: usize = 64;

/// How a direction carries GSO super-packets (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// Whole, as one unit: the direction is a constant delay only.
    Whole,
    /// Loss drawn per segment, the runs of survivors as units: delay and loss only.
    Runs,
    /// Cut into wire packets before the pipe.
    Segments,
}

impl Carry {
    pub fn for_direction(cfg: &crate::DirectionConfig) -> Carry {
        if cfg.is_pure_delay() {
            Carry::Whole
        } else if cfg.is_delay_and_loss() {
            Carry::Runs
        } else {
            Carry::Segments
        }
    }
}

/// Everything a relay thread needs.
pub(crate) struct RelayCtx {
    pub dir: Direction,
    pub pipe: Pipe<Buf>,
    /// How super-packets travel through this direction.
    pub carry: Carry,
    /// Indices of the lost segments of the super-packet at hand ([`Carry::Runs`]).
    pub lost: Vec<u32>,
    pub pool: Pool,
    pub rx: Arc<OwnedFd>,
    pub tx: Arc<OwnedFd>,
    pub stop: Arc<OwnedFd>,
    pub start_ns: u64,
    /// How long to keep delivering packets already in the link once asked to stop.
    pub linger: Duration,
    /// Run the relay at real-time priority.
    pub realtime: bool,
    /// `--pcap`: the capture both directions write to.
    pub capture: Option<Arc<std::sync::Mutex<crate::pcap::Capture>>>,
}

fn epoll_add(ep: RawFd, fd: RawFd, token: u64) -> Result<(), LinkError> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: ev is valid for the call.
    cvt(
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) },
        "epoll_ctl",
    )
    .map(|_| ())
}

/// Precise wake-ups for the calling relay thread, and real-time priority when asked.
fn tune_relay_thread(realtime: bool) {
    // Default timer slack (50 µs) would add to every delayed packet; ask for precise wakeups.
    // SAFETY: prctl on the calling thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if realtime {
        // On a busy machine a normal thread wakes milliseconds late (a scheduler tick); the
        // lowest real-time priority makes delays exact. The relay sleeps whenever it has
        // nothing due, and the kernel's RT throttling bounds it anyway. Failure (no
        // CAP_SYS_NICE) just leaves the normal policy.
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: applies to the calling thread; param is valid.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    }
}

/// Arms `timer` (a timerfd) for the link time `wake` after `start_ns`; None disarms it.
fn arm_timer(timer: RawFd, start_ns: u64, wake: Option<Duration>) {
    let at = wake.map(|t| start_ns + t.as_nanos() as u64).unwrap_or(0);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: spec is valid; a zero it_value disarms.
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

/// Reads (and so resets) the 8-byte counter of a timerfd or eventfd; non-blocking.
fn read_counter(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into v.
    unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
}

/// True when an IP packet carries UDP: IPv4 protocol 17, or IPv6 next header 17 (a UDP
/// datagram behind IPv6 extension headers is not looked for; QUIC sends none).
fn is_udp(ip: &[u8]) -> bool {
    match ip.first().map(|b| b >> 4) {
        Some(4) => ip.get(9) == Some(&17),
        Some(6) => ip.get(6) == Some(&17),
        _ => false,
    }
}

impl RelayCtx {
    /// Time on the link's clock.
    fn now(&self) -> Duration {
        Duration::from_nanos(monotonic_ns().saturating_sub(self.start_ns))
    }

    /// Reads up to [`READ_BATCH`] times into the pipe (all at one arrival timestamp);
    /// returns how many reads returned a packet.
    fn read_batch(&mut self) -> usize {
        let now = self.now();
        let rx = self.rx.as_raw_fd();
        // One large buffer receives every read; ordinary packets are copied out of it into
        // small ones, so it is only given away with a super-packet.
        let mut big = self.pool.large();
        let mut read = 0;
        while read < READ_BATCH {
            if read > 0 {
                // What the previous read brought may be due already (no delay): it leaves
                // before this relay asks for more, so a lone packet does not wait for the
                // read that finds the device empty.
                self.write_due();
            }
            // SAFETY: the buffer is data.len() bytes and exclusively borrowed.
            let n = unsafe {
                libc::read(
                    rx,
                    big.data.as_mut_ptr() as *mut libc::c_void,
                    big.data.len(),
                )
            };
            if n <= 0 {
                break;
            }
            read += 1;
            let n = n as usize;
            if n <= VNET_HDR_LEN {
                continue;
            }
            big.len = n;
            let hdr = VnetHdr::parse(&big.data);
            if self.pipe.blocks_udp() && is_udp(&big.data[VNET_HDR_LEN..n]) {
                let (segs, wire) = Gso::parse(&hdr, &big.data[VNET_HDR_LEN..n])
                    .filter(|_| hdr.is_gso())
                    .map(|g| (g.segments(), g.wire_len()))
                    .unwrap_or((1, n - VNET_HDR_LEN));
                self.pipe.drop_udp(now, segs, wire);
                if let Some(mut cap) = self.capture() {
                    let why = self.drop_comment("udp blocked");
                    cap.relayed(crate::pcap::IF_DROPPED, now, &big.data[..n], Some(&why));
                }
                continue;
            }
            if !hdr.is_gso() {
                let pkt = if n <= SMALL_BUF {
                    let mut b = self.pool.small();
                    b.data[..n].copy_from_slice(&big.data[..n]);
                    b.len = n;
                    b
                } else {
                    std::mem::replace(&mut big, self.pool.large())
                };
                self.admit(now, pkt, 1, n - VNET_HDR_LEN);
            } else if self.carry == Carry::Whole {
                // Measured, not cut: one unit that counts as its segments. A super-packet
                // this code cannot parse still goes through (nothing here needs its parts).
                let (segs, wire) = Gso::parse(&hdr, &big.data[VNET_HDR_LEN..n])
                    .map(|g| (g.segments(), g.wire_len()))
                    .unwrap_or((1, n - VNET_HDR_LEN));
                let pkt = std::mem::replace(&mut big, self.pool.large());
                self.admit(now, pkt, segs, wire);
            } else if self.carry == Carry::Runs && hdr.flags & F_NEEDS_CSUM != 0 {
                if let Some(whole) = self.runs(now, &hdr, &big.data[VNET_HDR_LEN..n]) {
                    let pkt = std::mem::replace(&mut big, self.pool.large());
                    self.admit_survivor(now, pkt, whole.0, whole.1);
                }
            } else {
                self.segment(now, &hdr, &big.data[VNET_HDR_LEN..n]);
            }
        }
        self.pool.put(big);
        read
    }

    fn admit_survivor(&mut self, now: Duration, mut pkt: Buf, segs: u32, wire: usize) {
        pkt.segs = segs;
        pkt.wire = wire;
        self.pipe.on_survivor(now, pkt);
    }

    /// Draws the loss of each segment of a super-packet in order; when none is lost, returns
    /// its (segments, wire bytes) for the caller to pass it on whole, otherwise passes each
    /// run of survivors on as one unit (rebuilt into a buffer of its own) and returns None.
    /// One that cannot be parsed (or has segments over the MTU buffer) is dropped, as by
    /// [`RelayCtx::segment`].
    fn runs(&mut self, now: Duration, hdr: &VnetHdr, ip: &[u8]) -> Option<(u32, usize)> {
        let g = Gso::parse(hdr, ip)?;
        if VNET_HDR_LEN + g.segment_len(0) > SMALL_BUF {
            return None;
        }
        let n = g.segments();
        self.lost.clear();
        for i in 0..n {
            if self.pipe.ingress(now, g.segment_len(i)) {
                self.lost.push(i);
            }
        }
        if self.lost.is_empty() {
            return Some((n, g.wire_len()));
        }
        if let Some(mut cap) = self.capture() {
            let why = self.drop_comment("loss");
            for &i in &self.lost {
                cap.segment(crate::pcap::IF_DROPPED, now, &g, i, Some(&why));
            }
        }
        let mut first = 0;
        for k in 0..=self.lost.len() {
            let end = self.lost.get(k).copied().unwrap_or(n);
            if end > first {
                let need = VNET_HDR_LEN + g.run_len(first, end);
                let mut b = if need <= SMALL_BUF {
                    self.pool.small()
                } else {
                    self.pool.large()
                };
                b.len = g.write_run(first, end, &mut b.data, Csum::Partial);
                self.admit_survivor(now, b, end - first, g.run_wire_len(first, end));
            }
            first = end + 1;
        }
        None
    }

    fn admit(&mut self, now: Duration, mut pkt: Buf, segs: u32, wire: usize) {
        pkt.segs = segs;
        pkt.wire = wire;
        self.pipe.on_packet(now, pkt);
    }

    /// Cuts a super-packet into its wire packets and feeds each to the pipe. One that cannot
    /// be cut (malformed, or segments over the MTU buffer) is dropped, as a NIC would.
    fn segment(&mut self, now: Duration, hdr: &VnetHdr, ip: &[u8]) {
        let Some(g) = Gso::parse(hdr, ip) else {
            return;
        };
        if VNET_HDR_LEN + g.segment_len(0) > SMALL_BUF {
            return;
        }
        let csum = if hdr.flags & F_NEEDS_CSUM != 0 {
            Csum::Partial
        } else {
            Csum::Full
        };
        for i in 0..g.segments() {
            let mut b = self.pool.small();
            b.len = g.write_segment(i, &mut b.data, csum);
            let wire = b.len - VNET_HDR_LEN;
            self.admit(now, b, 1, wire);
        }
    }

    /// The capture, locked for this thread's writes (None without `--pcap`).
    fn capture(&self) -> Option<std::sync::MutexGuard<'_, crate::pcap::Capture>> {
        self.capture
            .as_ref()
            .map(|c| c.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A dropped packet's comment in the capture: why, and which way it was going.
    fn drop_comment(&self, why: &str) -> String {
        let dir = match self.dir {
            Direction::Down => "down",
            Direction::Up => "up",
        };
        format!("dropped by {why}, {dir}")
    }

    /// Writes every packet that is due, each with its vnet header (and, with a capture,
    /// into it, with what the pipe dropped meanwhile).
    fn write_due(&mut self) {
        let now = self.now();
        let tx = self.tx.as_raw_fd();
        let iface = match self.dir {
            Direction::Down => crate::pcap::IF_DOWN,
            Direction::Up => crate::pcap::IF_UP,
        };
        let shared = self.capture.clone();
        let mut cap = shared
            .as_ref()
            .map(|c| c.lock().unwrap_or_else(|p| p.into_inner()));
        while let Some(buf) = self.pipe.poll_deliver(now) {
            if let Some(cap) = cap.as_mut() {
                cap.relayed(iface, now, &buf.data[..buf.len], None);
            }
            // SAFETY: buf.len <= data.len() bytes are initialised.
            // A failed write (device going away) loses the packet, as a wire would.
            unsafe { libc::write(tx, buf.data.as_ptr() as *const libc::c_void, buf.len) };
            self.pool.put(buf);
        }
        let Some(mut cap) = cap else {
            return;
        };
        let dropped: Vec<_> = self.pipe.take_dropped().collect();
        for (buf, why) in dropped {
            let text = self.drop_comment(why.as_str());
            cap.relayed(
                crate::pcap::IF_DROPPED,
                now,
                &buf.data[..buf.len],
                Some(&text),
            );
            self.pool.put(buf);
        }
    }
}

pub(crate) fn relay(mut ctx: RelayCtx) -> Result<DirectionStats, LinkError> {
    tune_relay_thread(ctx.realtime);
    // SAFETY: plain syscalls; fds checked and owned below.
    let ep = unsafe {
        OwnedFd::from_raw_fd(cvt(
            libc::epoll_create1(libc::EPOLL_CLOEXEC),
            "epoll_create1",
        )?)
    };
    let timer = unsafe {
        OwnedFd::from_raw_fd(cvt(
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            ),
            "timerfd_create",
        )?)
    };
    epoll_add(ep.as_raw_fd(), ctx.rx.as_raw_fd(), 0)?;
    epoll_add(ep.as_raw_fd(), timer.as_raw_fd(), 1)?;
    epoll_add(ep.as_raw_fd(), ctx.stop.as_raw_fd(), 2)?;
    let mut armed: Option<Duration> = None;
    let mut drain_until: Option<Duration> = None;
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
    let _ = ctx.dir;
    loop {
        let read = ctx.read_batch();
        ctx.write_due();
        if read == READ_BATCH {
            // More may be waiting: read again before sleeping.
            continue;
        }
        let mut wake = ctx.pipe.next_wakeup();
        if let Some(until) = drain_until {
            // Stopping: let packets already on the wire (a final ACK or FIN) arrive, but
            // never wait past the linger time.
            let now = ctx.now();
            if now >= until || wake.is_none() {
                return Ok(ctx.pipe.stats().clone());
            }
            wake = wake.map(|w| w.min(until));
        }
        if wake.is_some_and(|t| t <= ctx.now()) {
            continue;
        }
        if wake != armed {
            arm_timer(timer.as_raw_fd(), ctx.start_ns, wake);
            armed = wake;
        }
        // SAFETY: events is a valid array of the given length.
        let n = unsafe {
            libc::epoll_wait(
                ep.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                -1,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LinkError::Setup(format!("epoll_wait: {e}")));
        }
        for ev in &events[..n as usize] {
            match ev.u64 {
                1 => {
                    read_counter(timer.as_raw_fd());
                    armed = None;
                }
                2 => {
                    read_counter(ctx.stop.as_raw_fd());
                    drain_until.get_or_insert(ctx.now() + ctx.linger);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_udp;

    #[test]
    fn tells_udp_from_tcp_on_ipv4_and_ipv6() {
        let mut v4 = [0u8; 28];
        v4[0] = 0x45;
        v4[9] = 17;
        assert!(is_udp(&v4));
        v4[9] = 6;
        assert!(!is_udp(&v4));
        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        v6[6] = 17;
        assert!(is_udp(&v6));
        v6[6] = 6;
        assert!(!is_udp(&v6));
        assert!(!is_udp(&[]));
    }
}
