//! EXPERIMENT, not part of hxlab serve (issue 29, goal 1): the floor of an HTTP/3 server on
//! quinn-proto. One thread, no tokio, one UDP socket (quinn-udp, GSO and GRO, the server's
//! receive buffer, `hxlab_quic::set_quic_recv_buffer`), one `quinn_proto::Endpoint` driven
//! directly, with the QUIC and TLS configuration `hxlab serve` builds for its defaults
//! (`hxlab_serve::experiment`, from crates/hxlab-serve/src/tls.rs: TLS 1.3 on ring, ALPN
//! h3, 0-RTT accepted; 100 bidirectional streams, 4 MiB windows each way, 30 s idle timeout,
//! quinn's default congestion controller, MTU discovery and ACK settings). It answers every
//! request stream, once read to its end (nothing of it is parsed), with the same response
//! `hxlab serve` sends for `/bytes/SIZE`: HEADERS (`:status 200`, `date`, `content-type`,
//! `content-length`, QPACK static table, hxlab_wire's encoder) and the body as DATA frames of
//! at most 64 KiB (as the server streams its filler), from static bytes, then FIN. Like our
//! server it opens its control stream (SETTINGS) and the two QPACK streams once the handshake
//! is complete, and reads and discards the client's unidirectional streams.
//!
//! It measures how cheap an HTTP/3 server on quinn-proto can be on this machine: quinn-proto,
//! packet crypto and the kernel, with nothing of a real server around them — no routing, no
//! request parsing or validation, no limits, timeouts, statistics, GOAWAY, admission control,
//! or error handling (it panics on a socket error), one fixed response, and the response
//! transmitted after the requests of a receive batch were answered (the ACK rides with the
//! response data). It is not a server to use. `bench/server-h3-floor.sh` runs it beside
//! `hxlab serve` and Caddy; docs/serve.md ("Performance") has the figures.
//!
//! usage: proto_h3_server PORT SIZE [CERT KEY] [--segments N]
//!   listens on 127.0.0.1:PORT (UDP) until killed; answers every request with SIZE body bytes
//!   (at most 448 KiB); CERT/KEY: a PEM certificate chain and key (without them, the
//!   self-signed certificate `hxlab serve` makes); `--segments N` caps the datagrams
//!   of one GSO send at N (quinn's connection driver caps them at 10; default: what the socket
//!   takes, 64 on Linux, but at most 45, what fits in one 64 KiB UDP send at quinn-proto's
//!   largest datagram size). Prints one line when it listens, nothing per request; on SIGTERM or
//!   SIGINT, one line of totals (requests answered, sendmsg calls, datagrams each way) and exits.
use bytes::{Bytes, BytesMut};
use hxlab_wire::h3::{frame, stream as stream_type, write_frame_head};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, StreamEvent, StreamId,
};
use std::collections::HashMap;
use std::io::{IoSliceMut, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The largest DATA frame payload: `hxlab serve` streams bodies over 64 KiB in chunks of
/// this size (crates/hxlab-serve/src/body.rs, CHUNK), one DATA frame each.
const CHUNK: usize = 64 * 1024;
/// Chunks of one response at most: HEADERS, then a DATA frame head and its payload per chunk.
const MAX_CHUNKS: usize = 15;
static FILLER: [u8; CHUNK] = [b'x'; CHUNK];
/// Datagrams of one GSO send at most: a UDP GSO send carries at most 65,507 bytes (one IPv4
/// datagram's payload), and quinn-proto's datagrams grow to 1,452 bytes with MTU discovery.
/// quinn-proto does not know that limit (asked for 64 segments, it builds sends of up to 93 KB),
/// and quinn-udp treats the kernel's EMSGSIZE as a lost MTU probe (silently Ok): with 64
/// segments, 9 % of the floor's packets at 100 KiB were lost that way, and resent.
const MAX_GSO_SEGMENTS: usize = 65_507 / 1452;
/// recvmmsg calls per turn of the loop at most (each up to quinn-udp's BATCH_SIZE GRO batches).
const RECV_CALLS: usize = 16;
/// Set by SIGTERM or SIGINT: print the totals and exit.
static STOP: AtomicBool = AtomicBool::new(false);

/// What the floor did, for its last line.
#[derive(Default)]
struct Totals {
    answered: u64,
    sends: u64,
    tx: u64,
    rx: u64,
    /// Of the connections gone: packets declared lost, congestion events, the last MTU.
    lost: u64,
    congestion: u64,
    mtu: u16,
}

impl Totals {
    fn add_path(&mut self, q: &quinn_proto::Connection) {
        let p = q.stats().path;
        self.lost += p.lost_packets;
        self.congestion += p.congestion_events;
        self.mtu = p.current_mtu;
    }
}

/// One connection: quinn-proto's state and what the loop keeps beside it.
struct Conn {
    q: quinn_proto::Connection,
    /// Responses the stream's flow control did not take whole yet: what is left of them.
    blocked: Vec<(StreamId, Vec<Bytes>)>,
    /// In the list of connections to drive in this turn of the loop.
    touched: bool,
    /// quinn-proto's next timer, as of the last time it was driven.
    timeout: Option<Instant>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: proto_h3_server PORT SIZE [CERT KEY] [--segments N]";
    let mut pos = Vec::new();
    let mut cap = usize::MAX;
    let mut i = 1;
    while i < args.len() {
        if args[i] == "--segments" {
            cap = args.get(i + 1).and_then(|s| s.parse().ok()).expect(usage);
            i += 2;
        } else {
            pos.push(args[i].clone());
            i += 1;
        }
    }
    let port: u16 = pos.first().and_then(|s| s.parse().ok()).expect(usage);
    let size: usize = pos.get(1).and_then(|s| s.parse().ok()).expect(usage);
    assert!(
        size <= (MAX_CHUNKS - 1) / 2 * CHUNK,
        "SIZE at most {} bytes",
        (MAX_CHUNKS - 1) / 2 * CHUNK
    );
    // What `hxlab serve` runs with its defaults and this certificate: its QUIC and TLS
    // configuration, and its control stream's SETTINGS.
    let cfg = hxlab_serve::ServeConfig {
        cert: pos.get(2).map(Into::into),
        key: pos.get(3).map(Into::into),
        ..Default::default()
    };
    let server_config =
        Arc::new(hxlab_serve::experiment::quic_server_config(&cfg).expect("QUIC server config"));
    let response = response_chunks(size);

    let sock = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], port))).expect("bind");
    hxlab_quic::set_quic_recv_buffer(std::os::fd::AsFd::as_fd(&sock));
    sock.set_nonblocking(true).expect("nonblocking");
    let state = quinn::udp::UdpSocketState::new((&sock).into()).expect("udp state");
    let segments = state
        .max_gso_segments()
        .min(MAX_GSO_SEGMENTS)
        .min(cap)
        .max(1);
    let gro = state.gro_segments();
    // As quinn's endpoint: MTU discovery when the socket never fragments.
    let mut ep = Endpoint::new(
        Arc::new(EndpointConfig::default()),
        Some(server_config),
        !state.may_fragment(),
        None,
    );
    println!(
        "proto_h3_server: listening on 127.0.0.1:{port} (udp), {size}-byte responses, \
         GSO {segments} segments per send (socket: {}), GRO {gro}",
        state.max_gso_segments()
    );
    let _ = std::io::stdout().flush();
    on_signals_stop();
    let mut tot = Totals::default();

    let mut conns: HashMap<ConnectionHandle, Conn> = HashMap::new();
    let mut touched: Vec<ConnectionHandle> = Vec::new();
    const BATCH: usize = quinn::udp::BATCH_SIZE;
    // One slot per datagram of a recvmmsg, each large enough for a GRO batch (at most 64 KiB).
    let slot = 64 * 1024;
    let mut recv_buf = vec![0u8; slot * BATCH];
    let mut metas = [quinn::udp::RecvMeta::default(); BATCH];
    let mut txbuf: Vec<u8> = Vec::with_capacity(segments * 1500);
    let mut respbuf: Vec<u8> = Vec::new();
    let control = hxlab_serve::experiment::h3_control_preamble(&cfg);

    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        // What the socket has (at most RECV_CALLS recvmmsg calls per turn, so answers and
        // ACKs go out under any load), datagram by datagram into the endpoint.
        for _ in 0..RECV_CALLS {
            let mut iovs: [IoSliceMut; BATCH] = {
                let mut chunks = recv_buf.chunks_mut(slot).map(IoSliceMut::new);
                std::array::from_fn(|_| chunks.next().expect("BATCH slots"))
            };
            let n = match state.recv((&sock).into(), &mut iovs, &mut metas) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => continue,
                Err(e) => panic!("recv: {e}"),
            };
            for (m, buf) in metas.iter().zip(iovs.iter()).take(n) {
                // One copy per GRO batch, as quinn's endpoint makes.
                let mut data = BytesMut::from(&buf[..m.len]);
                while !data.is_empty() {
                    let d = data.split_to(m.stride.min(data.len()));
                    tot.rx += 1;
                    let ecn = m
                        .ecn
                        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                    respbuf.clear();
                    match ep.handle(now, m.addr, m.dst_ip, ecn, d, &mut respbuf) {
                        Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                            if let Some(c) = conns.get_mut(&ch) {
                                c.q.handle_event(ev);
                                touch(c, ch, &mut touched);
                            }
                        }
                        Some(DatagramEvent::NewConnection(incoming)) => {
                            respbuf.clear();
                            match ep.accept(incoming, now, &mut respbuf, None) {
                                Ok((ch, q)) => {
                                    let c = conns.entry(ch).or_insert(Conn {
                                        q,
                                        blocked: Vec::new(),
                                        touched: false,
                                        timeout: None,
                                    });
                                    touch(c, ch, &mut touched);
                                }
                                Err(e) => {
                                    if let Some(t) = e.response {
                                        send(&state, &sock, &t, &respbuf, &mut tot);
                                    }
                                }
                            }
                        }
                        Some(DatagramEvent::Response(t)) => {
                            send(&state, &sock, &t, &respbuf, &mut tot)
                        }
                        None => {}
                    }
                }
            }
        }
        // Timers that are due.
        for (ch, c) in conns.iter_mut() {
            if c.timeout.is_some_and(|t| t <= now) {
                c.q.handle_timeout(now);
                touch(c, *ch, &mut touched);
            }
        }
        // Every connection something happened to: its events, answers, then its packets.
        for ch in touched.drain(..) {
            let Some(c) = conns.get_mut(&ch) else {
                continue;
            };
            c.touched = false;
            while let Some(ev) = c.q.poll() {
                match ev {
                    Event::Connected => {
                        // Our control stream with SETTINGS, and the QPACK streams, as
                        // `hxlab serve` opens them.
                        for bytes in [
                            &control[..],
                            &[stream_type::QPACK_ENCODER as u8][..],
                            &[stream_type::QPACK_DECODER as u8][..],
                        ] {
                            if let Some(id) = c.q.streams().open(Dir::Uni) {
                                let _ = c.q.send_stream(id).write(bytes);
                            }
                        }
                    }
                    Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                        while let Some(id) = c.q.streams().accept(Dir::Bi) {
                            if read_to_end(&mut c.q, id) {
                                respond(c, id, &response);
                                tot.answered += 1;
                            }
                        }
                    }
                    Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                        while let Some(id) = c.q.streams().accept(Dir::Uni) {
                            read_to_end(&mut c.q, id);
                        }
                    }
                    Event::Stream(StreamEvent::Readable { id }) => {
                        // A request's end, or more of a client's unidirectional stream
                        // (read and discarded; a request stream already answered is closed
                        // and reads as nothing).
                        let ended = read_to_end(&mut c.q, id);
                        if ended && id.dir() == Dir::Bi {
                            respond(c, id, &response);
                            tot.answered += 1;
                        }
                    }
                    Event::Stream(StreamEvent::Writable { id }) => resume(c, id),
                    _ => {}
                }
            }
            while let Some(ev) = c.q.poll_endpoint_events() {
                if let Some(cev) = ep.handle_event(ch, ev) {
                    c.q.handle_event(cev);
                }
            }
            loop {
                txbuf.clear();
                let Some(t) = c.q.poll_transmit(now, segments, &mut txbuf) else {
                    break;
                };
                send(&state, &sock, &t, &txbuf, &mut tot);
            }
            c.timeout = c.q.poll_timeout();
            if c.q.is_drained() {
                tot.add_path(&c.q);
                conns.remove(&ch);
            }
        }
        // Sleep until a datagram or the next timer (rounded up to the millisecond, as tokio's
        // timers are).
        let next = conns.values().filter_map(|c| c.timeout).min();
        let wait_ms = next.map_or(1000, |t| {
            let d = t.saturating_duration_since(Instant::now());
            d.as_micros().div_ceil(1000).min(1000) as i32
        });
        let mut p = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut p, 1, wait_ms) };
    }
    for c in conns.values() {
        tot.add_path(&c.q);
    }
    let per = |n: u64| n as f64 / tot.answered.max(1) as f64;
    println!(
        "proto_h3_server: {} requests answered, {} sendmsg calls ({:.3}/request), \
         {} datagrams sent ({:.3}/request), {} received ({:.3}/request), \
         {} packets lost, {} congestion events, MTU {}",
        tot.answered,
        tot.sends,
        per(tot.sends),
        tot.tx,
        per(tot.tx),
        tot.rx,
        per(tot.rx),
        tot.lost,
        tot.congestion,
        tot.mtu
    );
}

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGTERM and SIGINT set [`STOP`] (without SA_RESTART: the loop's poll returns at once).
fn on_signals_stop() {
    // SAFETY: a zeroed sigaction with a handler that only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

fn touch(c: &mut Conn, ch: ConnectionHandle, touched: &mut Vec<ConnectionHandle>) {
    if !c.touched {
        c.touched = true;
        touched.push(ch);
    }
}

/// Reads and discards what stream `id` has; true when it reached its end.
fn read_to_end(q: &mut quinn_proto::Connection, id: StreamId) -> bool {
    let mut rs = q.recv_stream(id);
    let Ok(mut chunks) = rs.read(true) else {
        return false;
    };
    let fin = loop {
        match chunks.next(usize::MAX) {
            Ok(Some(_)) => {}
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    let _ = chunks.finalize();
    fin
}

/// Writes the response on request stream `id` and finishes it, or keeps what the stream's
/// flow control did not take for its `Writable` event.
fn respond(c: &mut Conn, id: StreamId, response: &[Bytes]) {
    let mut chunks: [Bytes; MAX_CHUNKS] = Default::default();
    for (slot, b) in chunks.iter_mut().zip(response) {
        *slot = b.clone();
    }
    let n = response.len();
    write_or_keep(c, id, &mut chunks[..n]);
}

fn write_or_keep(c: &mut Conn, id: StreamId, chunks: &mut [Bytes]) {
    let mut s = c.q.send_stream(id);
    let done = match s.write_chunks(chunks) {
        Ok(w) => w.chunks == chunks.len(),
        Err(quinn_proto::WriteError::Blocked) => false,
        // Stopped or gone: nothing more to do for it.
        Err(_) => return,
    };
    if done {
        let _ = s.finish();
    } else {
        let rest = chunks.iter().filter(|b| !b.is_empty()).cloned().collect();
        c.blocked.push((id, rest));
    }
}

/// Continues a response the stream's flow control held back.
fn resume(c: &mut Conn, id: StreamId) {
    let Some(k) = c.blocked.iter().position(|(s, _)| *s == id) else {
        return;
    };
    let (_, mut rest) = c.blocked.swap_remove(k);
    write_or_keep(c, id, &mut rest);
}

/// Sends one transmit of quinn-proto's (`buf` holds its bytes), waiting (at most 100 ms at a
/// time) while the socket's send buffer is full.
fn send(
    state: &quinn::udp::UdpSocketState,
    sock: &UdpSocket,
    t: &quinn_proto::Transmit,
    buf: &[u8],
    tot: &mut Totals,
) {
    tot.sends += 1;
    tot.tx += t.segment_size.map_or(1, |s| t.size.div_ceil(s)) as u64;
    let tr = quinn::udp::Transmit {
        destination: t.destination,
        ecn: t
            .ecn
            .and_then(|e| quinn::udp::EcnCodepoint::from_bits(e as u8)),
        contents: &buf[..t.size],
        segment_size: t.segment_size,
        src_ip: t.src_ip,
    };
    for _ in 0..100 {
        match state.send(sock.into(), &tr) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd: sock.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut p, 1, 100) };
            }
            // As quinn: a send error loses the datagrams, which QUIC recovers from.
            Err(_) => return,
        }
    }
}

/// The response as chunks for `write_chunks`: HEADERS (+ the DATA frame and its body, copied
/// behind it, up to 1 KiB, as `hxlab serve` does), else HEADERS, then per 64 KiB of body a DATA
/// frame head and a slice of the static filler.
fn response_chunks(size: usize) -> Vec<Bytes> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let len = size.to_string();
    let fields: [(&[u8], &[u8]); 4] = [
        (&b":status"[..], &b"200"[..]),
        (b"date", date.as_bytes()),
        (b"content-type", b"application/octet-stream"),
        (b"content-length", len.as_bytes()),
    ];
    let mut section = Vec::new();
    hxlab_wire::qpack::encode_field_section(fields.iter().copied(), &mut section);
    let mut head = Vec::new();
    write_frame_head(&mut head, frame::HEADERS, section.len() as u64);
    head.extend_from_slice(&section);
    if size <= 1024 {
        if size > 0 {
            write_frame_head(&mut head, frame::DATA, size as u64);
            head.extend_from_slice(&FILLER[..size]);
        }
        return vec![Bytes::from(head)];
    }
    let mut out = vec![Bytes::from(head)];
    let mut left = size;
    while left > 0 {
        let n = left.min(CHUNK);
        let mut dh = Vec::with_capacity(16);
        write_frame_head(&mut dh, frame::DATA, n as u64);
        out.push(Bytes::from(dh));
        out.push(Bytes::from_static(&FILLER[..n]));
        left -= n;
    }
    out
}
