//! floor-quiche: a second "floor" HTTP/3 client for bench/client-h3-floors.sh (issue 29,
//! goal 3), on Cloudflare's quiche (its low-level `quiche::Connection` and `quiche::h3`,
//! BoringSSL) instead of quinn-proto. It answers "is the cost of our h3 client quinn-proto's,
//! or QUIC's on this machine?" by measuring what another QUIC stack costs per request against
//! the same `hxlab serve`, beside `hxlab load` and the quinn-proto floor
//! (crates/hxlab-load/examples/proto_h3.rs), in the same run.
//!
//! Not a load generator and not part of the workspace (CI does not build it): one thread, one
//! UDP socket, N connections × DEPTH concurrent GETs of one URL, closed loop until TOTAL
//! responses have ended; bodies are read and discarded; no certificate verification (as
//! `hxlab load -k`); no latency figures. It exits 1 on any error, on a response that is not
//! 200, or after 60 s without a completed response (never hangs).
//!
//! The wire, like for like with our client (crates/hxlab-load/src/tls.rs `quic_config`, which
//! takes quinn's defaults for what it does not set):
//! - windows: 16 MiB per stream and 1 GiB per connection granted to the server (our
//!   `stream_receive_window` / `receive_window`); quiche's window auto-tuning is capped at the
//!   same figures so it never grants more;
//! - 100 bidirectional and 100 unidirectional streams the server may open (quinn's default);
//! - idle timeout 10 s (our `--connect-timeout` default); quinn's keep-alive is not
//!   reproduced (a closed-loop run is never idle);
//! - UDP payload: 1200 at first, path MTU discovery up to 1452 — quinn's defaults (initial MTU
//!   1200, MTU discovery upper bound 1452), not more;
//! - congestion control: CUBIC, which quinn runs by default and which both `hxlab serve` and
//!   `hxlab load` therefore run in bench/client_h3.py (neither is given --cc there);
//! - HTTP/3 SETTINGS as our client's: QPACK dynamic table 0, blocked streams 0, max field
//!   section 256 KiB; quiche's GREASE off (our client sends none);
//! - ACKs: quiche decides what and when to acknowledge, as quinn-proto does for proto_h3; the
//!   loop, like proto_h3's, lets every connection process all it received and issue its next
//!   requests before it asks for packets, so an ACK can ride with the requests.
//! - pacing: quiche stamps each packet with a send time (`SendInfo::at`); it is ignored and
//!   every packet is sent at once, as the client's packets are small requests and ACKs.
//!
//! Socket: GSO and GRO, as quinn-udp uses for our client (so the kernel's share compares):
//! GRO (`UDP_GRO`) costs a sockopt and reading one cmsg, and `recvmmsg` takes up to 16 GRO
//! batches per call (quinn-udp takes 32 on Linux); each batch is split into its segments.
//! GSO (`UDP_SEGMENT` cmsg) costs a little bookkeeping: quiche's `send` gives one packet per
//! call, so the packets one connection has to send in a turn are written back to back into
//! one buffer while they are the same size (the last may be shorter) and go out as one
//! `sendmsg` — per connection, as quinn-udp sends one transmit per connection; no batching
//! across connections.
//!
//! usage: floor-quiche URL TOTAL [CONNS] [DEPTH]      (defaults 50 × 10)
//! prints one line: CPU µs/request (getrusage user+sys of the whole process, handshakes
//! included), req/s, datagrams sent and received per request (UDP datagrams, GRO/GSO
//! segments counted one by one, as proto_h3 counts quinn-proto's).
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

// 8 bytes, as quinn-proto's default connection IDs (what the server puts in every packet).
const CID_LEN: usize = 8;
const MAX_PAYLOAD: usize = 1452;
const SEG_BUF: usize = 65536; // one GRO batch / one GSO send at most
const RX_BATCH: usize = 16;
const GSO_MAX_SEGMENTS: usize = 64;
const STALL: Duration = Duration::from_secs(60);

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("floor-quiche: {msg}");
    std::process::exit(1)
}

struct Conn {
    q: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    inflight: usize,
    dirty: bool,
}

struct Url {
    addr: SocketAddr,
    host: String,
    authority: String,
    path: String,
}

fn parse_url(u: &str) -> Url {
    let rest = u
        .strip_prefix("https://")
        .unwrap_or_else(|| die(format!("{u}: only https:// URLs")));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| die(format!("{authority}: not host:port")));
    let host = authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority);
    Url {
        addr,
        host: host.trim_matches(|c| c == '[' || c == ']').to_string(),
        authority: authority.to_string(),
        path: path.to_string(),
    }
}

fn setsockopt_int(fd: i32, level: i32, name: i32, v: i32) -> bool {
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        ) == 0
    }
}

/// Sends `len` bytes of `buf` to `to` as one datagram, or as GSO segments of `seg` bytes
/// (the last one may be shorter) when `seg < len`. Waits (poll, bounded) while the socket
/// buffer is full.
fn send_gso(fd: i32, to: &SocketAddr, buf: &[u8], seg: usize, gso: bool) -> usize {
    let SocketAddr::V4(v4) = to else {
        die("IPv4 only")
    };
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = v4.port().to_be();
    sa.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
    if !gso || seg >= buf.len() {
        // No GSO: one datagram per packet.
        let mut n = 0;
        let step = if gso { buf.len() } else { seg };
        for chunk in buf.chunks(step) {
            loop {
                let r = unsafe {
                    libc::sendto(
                        fd,
                        chunk.as_ptr() as *const libc::c_void,
                        chunk.len(),
                        0,
                        &sa as *const _ as *const libc::sockaddr,
                        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    )
                };
                if r >= 0 {
                    break;
                }
                wait_writable(fd);
            }
            SEND_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            n += 1;
        }
        return n;
    }
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cmsg_buf = [0u64; 8];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &mut sa as *mut _ as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg_buf.as_mut_ptr() as *mut libc::c_void;
    unsafe {
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg as u16);
    }
    loop {
        let r = unsafe { libc::sendmsg(fd, &msg, 0) };
        if r >= 0 {
            break;
        }
        wait_writable(fd);
    }
    SEND_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    buf.len().div_ceil(seg)
}

/// sendto/sendmsg calls that succeeded (each may carry many GSO segments).
static SEND_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn wait_writable(fd: i32) {
    let e = std::io::Error::last_os_error();
    if e.kind() != std::io::ErrorKind::WouldBlock && e.raw_os_error() != Some(libc::ENOBUFS) {
        die(format!("send: {e}"));
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    unsafe { libc::poll(&mut p, 1, 100) };
}

/// Everything `c` has to send now, GSO-batched; returns datagrams sent.
fn flush(c: &mut quiche::Connection, fd: i32, buf: &mut [u8], gso: bool) -> usize {
    let mut sent = 0;
    let mut len = 0; // bytes in buf
    let mut seg = 0; // segment size of the batch in buf (0: empty)
    let mut to = None;
    loop {
        // Room for one more full-size packet, and within GSO's segment limit?
        if seg != 0 && (buf.len() - len < MAX_PAYLOAD || len / seg >= GSO_MAX_SEGMENTS) {
            sent += send_gso(fd, &to.unwrap(), &buf[..len], seg, gso);
            len = 0;
            seg = 0;
        }
        let (n, info) = match c.send(&mut buf[len..]) {
            Ok(v) => v,
            Err(quiche::Error::Done) => break,
            Err(e) => die(format!("quiche send: {e:?}")),
        };
        to = Some(info.to);
        if seg == 0 {
            seg = n;
            len = n;
        } else if n == seg {
            len += n;
        } else if n < seg {
            // A shorter packet ends the batch.
            len += n;
            sent += send_gso(fd, &info.to, &buf[..len], seg, gso);
            len = 0;
            seg = 0;
        } else {
            // Larger than the batch's segments: send the batch, start over with this one.
            sent += send_gso(fd, &info.to, &buf[..len], seg, gso);
            buf.copy_within(len..len + n, 0);
            seg = n;
            len = n;
        }
        if !gso && seg != 0 {
            sent += send_gso(fd, &info.to, &buf[..len], seg, gso);
            len = 0;
            seg = 0;
        }
    }
    if seg != 0 {
        sent += send_gso(fd, &to.unwrap(), &buf[..len], seg, gso);
    }
    sent
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        die("usage: floor-quiche URL TOTAL [CONNS] [DEPTH]");
    }
    let url = parse_url(&args[1]);
    let total: u64 = args[2].parse().unwrap_or_else(|_| die("TOTAL: a number"));
    let nconns: usize = args
        .get(3)
        .map_or(50, |s| s.parse().unwrap_or_else(|_| die("CONNS")));
    let depth: usize = args
        .get(4)
        .map_or(10, |s| s.parse().unwrap_or_else(|_| die("DEPTH")));
    let gso = std::env::var_os("FLOOR_NO_GSO").is_none();

    let mut cfg = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    cfg.verify_peer(false);
    cfg.set_application_protos(&[b"h3"]).unwrap();
    cfg.grease(false);
    cfg.set_max_idle_timeout(10_000);
    cfg.set_initial_max_data(1 << 30);
    cfg.set_initial_max_stream_data_bidi_local(1 << 24);
    cfg.set_initial_max_stream_data_bidi_remote(1 << 24);
    cfg.set_initial_max_stream_data_uni(1 << 24);
    cfg.set_max_stream_window(1 << 24);
    cfg.set_max_connection_window(1 << 30);
    cfg.set_initial_max_streams_bidi(100);
    cfg.set_initial_max_streams_uni(100);
    cfg.set_max_send_udp_payload_size(MAX_PAYLOAD);
    cfg.discover_pmtu(true);
    cfg.set_cc_algorithm(quiche::CongestionControlAlgorithm::CUBIC);
    let mut h3cfg = quiche::h3::Config::new().unwrap();
    h3cfg.set_qpack_max_table_capacity(0);
    h3cfg.set_qpack_blocked_streams(0);
    h3cfg.set_max_field_section_size(256 * 1024);

    let sock = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| die(format!("bind: {e}")));
    sock.set_nonblocking(true).unwrap();
    let fd = sock.as_raw_fd();
    let local = sock.local_addr().unwrap();
    let gro = gso && setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1);
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);

    let req = vec![
        quiche::h3::Header::new(b":method", b"GET"),
        quiche::h3::Header::new(b":scheme", b"https"),
        quiche::h3::Header::new(b":authority", url.authority.as_bytes()),
        quiche::h3::Header::new(b":path", url.path.as_bytes()),
        quiche::h3::Header::new(b"user-agent", b"hxlab/0.1.0"),
    ];

    let t0 = Instant::now();
    let mut conns: Vec<Conn> = Vec::with_capacity(nconns);
    let mut txbuf = vec![0u8; SEG_BUF];
    let mut sent_dgrams = 0usize;
    for i in 0..nconns {
        // The connection's index is in its CID: every packet the server sends carries it.
        let mut cid = [0u8; CID_LEN];
        cid[..4].copy_from_slice(&(i as u32).to_be_bytes());
        let seed = (t0.elapsed().as_nanos() as u64) ^ (std::process::id() as u64) << 32;
        cid[4..8].copy_from_slice(&seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()[..4]);
        let scid = quiche::ConnectionId::from_ref(&cid);
        let mut q = quiche::connect(Some(&url.host), &scid, local, url.addr, &mut cfg)
            .unwrap_or_else(|e| die(format!("connect: {e:?}")));
        sent_dgrams += flush(&mut q, fd, &mut txbuf, gso);
        conns.push(Conn {
            q,
            h3: None,
            inflight: 0,
            dirty: false,
        });
    }

    let mut rxbufs: Vec<Vec<u8>> = (0..RX_BATCH).map(|_| vec![0u8; SEG_BUF]).collect();
    let mut rx_dgrams = 0usize;
    let mut rx_calls = 0usize; // recvmmsg calls that returned datagrams
    let mut started = 0u64;
    let mut done = 0u64;
    let mut body = 0u64;
    let mut sink = vec![0u8; 64 * 1024];
    let mut last_progress = Instant::now();
    let mut last_done = 0u64;

    // recvmmsg state, allocated once.
    let mut iovs: Vec<libc::iovec> = rxbufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    let mut cmsgs = vec![[0u64; 8]; RX_BATCH];
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; RX_BATCH];

    while done < total {
        // 1. Receive everything there is.
        loop {
            for k in 0..RX_BATCH {
                let h = &mut hdrs[k].msg_hdr;
                h.msg_name = std::ptr::null_mut();
                h.msg_namelen = 0;
                h.msg_iov = &mut iovs[k];
                h.msg_iovlen = 1;
                h.msg_control = cmsgs[k].as_mut_ptr() as *mut libc::c_void;
                h.msg_controllen = std::mem::size_of_val(&cmsgs[k]) as _;
                h.msg_flags = 0;
                hdrs[k].msg_len = 0;
            }
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    RX_BATCH as u32,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    break;
                }
                die(format!("recvmmsg: {e}"));
            }
            rx_calls += 1;
            for k in 0..n as usize {
                let len = hdrs[k].msg_len as usize;
                let mut stride = len;
                if gro {
                    unsafe {
                        let mut c = libc::CMSG_FIRSTHDR(&hdrs[k].msg_hdr);
                        while !c.is_null() {
                            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                                stride = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u16)
                                    as usize;
                            }
                            c = libc::CMSG_NXTHDR(&hdrs[k].msg_hdr, c);
                        }
                    }
                }
                let buf = &mut rxbufs[k][..len];
                for d in buf.chunks_mut(stride.max(1)) {
                    rx_dgrams += 1;
                    // Short header: DCID right after the first byte; long: after version and length.
                    let off = if d[0] & 0x80 != 0 { 6 } else { 1 };
                    if d.len() < off + 4 {
                        continue;
                    }
                    let i = u32::from_be_bytes(d[off..off + 4].try_into().unwrap()) as usize;
                    let Some(c) = conns.get_mut(i) else { continue };
                    let info = quiche::RecvInfo {
                        from: url.addr,
                        to: local,
                    };
                    match c.q.recv(d, info) {
                        Ok(_) | Err(quiche::Error::Done) => {}
                        Err(e) => die(format!("quiche recv: {e:?}")),
                    }
                    c.dirty = true;
                }
            }
            if (n as usize) < RX_BATCH {
                break;
            }
        }

        // 2. Timers, the application, then what each connection has to send.
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for c in conns.iter_mut() {
            if c.q.timeout_instant().is_some_and(|t| t <= now) {
                c.q.on_timeout();
                c.dirty = true;
            }
            if c.dirty {
                c.dirty = false;
                if c.q.is_closed() {
                    die(format!(
                        "connection closed: peer {:?}, local {:?}, timed out {}",
                        c.q.peer_error(),
                        c.q.local_error(),
                        c.q.is_timed_out()
                    ));
                }
                if c.h3.is_none() && c.q.is_established() {
                    c.h3 = Some(
                        quiche::h3::Connection::with_transport(&mut c.q, &h3cfg)
                            .unwrap_or_else(|e| die(format!("h3: {e:?}"))),
                    );
                }
                if let Some(h3) = c.h3.as_mut() {
                    loop {
                        match h3.poll(&mut c.q) {
                            Ok((_, quiche::h3::Event::Headers { list, .. })) => {
                                let st = list
                                    .iter()
                                    .find(|h| quiche::h3::NameValue::name(*h) == b":status");
                                if st.map(quiche::h3::NameValue::value) != Some(&b"200"[..]) {
                                    die("a response that is not 200");
                                }
                            }
                            Ok((id, quiche::h3::Event::Data)) => loop {
                                match h3.recv_body(&mut c.q, id, &mut sink) {
                                    Ok(n) => body += n as u64,
                                    Err(quiche::h3::Error::Done) => break,
                                    Err(e) => die(format!("recv_body: {e:?}")),
                                }
                            },
                            Ok((_, quiche::h3::Event::Finished)) => {
                                c.inflight -= 1;
                                done += 1;
                            }
                            Ok((id, quiche::h3::Event::Reset(e))) => {
                                die(format!("stream {id} reset: {e}"))
                            }
                            Ok((_, quiche::h3::Event::GoAway)) => die("GOAWAY"),
                            Ok(_) => {}
                            Err(quiche::h3::Error::Done) => break,
                            Err(e) => die(format!("h3 poll: {e:?}")),
                        }
                    }
                    while c.inflight < depth && started < total {
                        match h3.send_request(&mut c.q, &req, true) {
                            Ok(_) => {
                                c.inflight += 1;
                                started += 1;
                            }
                            Err(quiche::h3::Error::StreamBlocked)
                            | Err(quiche::h3::Error::TransportError(quiche::Error::StreamLimit)) => {
                                break
                            }
                            Err(e) => die(format!("send_request: {e:?}")),
                        }
                    }
                }
                sent_dgrams += flush(&mut c.q, fd, &mut txbuf, gso);
            }
            if let Some(t) = c.q.timeout_instant() {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        if done >= total {
            break;
        }
        if done != last_done {
            last_done = done;
            last_progress = now;
        } else if now.duration_since(last_progress) > STALL {
            die(format!(
                "no response completed for {} s ({done}/{total} done)",
                STALL.as_secs()
            ));
        }

        // 3. Wait for datagrams or the next timer (at most 1 s: the stall check runs).
        let wait = next
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) };
    }

    let wall = t0.elapsed();
    // Close every connection (H3_NO_ERROR), so the server does not hold them until its idle
    // timeout; inside the measured CPU, as `hxlab load` closes its own.
    for c in conns.iter_mut() {
        let _ = c.q.close(true, 0x100, b"");
        sent_dgrams += flush(&mut c.q, fd, &mut txbuf, gso);
    }
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let cpu = ru.ru_utime.tv_sec as f64
        + ru.ru_utime.tv_usec as f64 / 1e6
        + ru.ru_stime.tv_sec as f64
        + ru.ru_stime.tv_usec as f64 / 1e6;
    let mtu = conns
        .iter()
        .map(|c| c.q.max_send_udp_payload_size())
        .max()
        .unwrap_or(0);
    println!(
        "floor-quiche gso={gso} gro={gro}: {done} done, body {body}, cpu {:.2} us/req, {:.0} req/s, tx {:.3} rx {:.3} datagrams/req, send calls {:.3} recvmmsg calls {:.3} /req, max send payload {mtu}",
        cpu * 1e6 / done as f64,
        done as f64 / wall.as_secs_f64(),
        sent_dgrams as f64 / done as f64,
        rx_dgrams as f64 / done as f64,
        SEND_CALLS.load(std::sync::atomic::Ordering::Relaxed) as f64 / done as f64,
        rx_calls as f64 / done as f64,
    );
}
