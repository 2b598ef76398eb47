//! EXPERIMENT, not part of hxlab load (issue 29, goal 3): a closed-loop HTTP/3 client that
//! drives quinn-proto directly on one thread and one UDP socket (quinn-udp with GSO/GRO; no
//! tokio), reusing hxlab-load's request template, TLS/QUIC config and `ResponseParser`. It
//! was the evidence for moving `hxlab load --proto h3` off quinn's async layer onto its own
//! quinn-proto driver (`hxlab_load::h3::Driver`, which transmits after the sessions ran, so
//! the ACK of a batch of responses rides in the packet that carries the next requests;
//! `--ack-first` transmits before, as quinn's connection driver did). It is kept as the
//! floor of that design: what quinn-proto alone costs per request, without tokio, the
//! recorder, timeouts or error handling, to compare the real client with in the same run.
//! It is not a load generator: no timeouts, no error handling (it panics), no 0-RTT, no
//! GOAWAY, no latency figures, 1 URL; one run in six at 100 KiB stalled until the idle
//! timeout (not investigated).
//!
//! usage: proto_h3 URL N [CONNS] [DEPTH] [--ack-first]   (prints CPU µs/request, req/s and
//! datagrams per request; CPU is the whole process's, handshakes included)
use bytes::BytesMut;
use hxlab_load::h3::ResponseParser;
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, StreamEvent, StreamId,
};
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::sync::Arc;
use std::time::Instant;

struct Conn {
    c: quinn_proto::Connection,
    slots: Vec<(StreamId, ResponseParser)>,
    uni: Vec<StreamId>,
    dec: hxlab_load::h3::ResponseDecoder,
    connected: bool,
    dirty: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args[1].clone();
    let total: u64 = args[2].parse().unwrap();
    let nconns: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    let depth: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(10);
    let ack_first = args.iter().any(|a| a == "--ack-first");
    let cfg = hxlab_load::LoadConfig {
        urls: vec![url],
        insecure: true,
        proto: hxlab_load::Proto::H3,
        ..Default::default()
    };
    let target = hxlab_load::target::Target::from_config(&cfg).unwrap();
    let request = target.requests[0].h3_request.clone();
    let configs = hxlab_load::tls::quic_config(&cfg).unwrap();
    let addr = target.addr;

    let sock = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // The receive buffer `hxlab load` gives its socket.
    hxlab_quic::set_quic_recv_buffer(std::os::fd::AsFd::as_fd(&sock));
    sock.set_nonblocking(true).unwrap();
    let state = quinn::udp::UdpSocketState::new((&sock).into()).unwrap();
    let gso = state.max_gso_segments();
    let gro = state.gro_segments();
    let mut ep = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
    let t0 = Instant::now();
    let mut conns: HashMap<ConnectionHandle, Conn> = HashMap::new();
    for _ in 0..nconns {
        let (ch, c) = ep
            .connect(
                Instant::now(),
                configs.for_connection().0,
                addr,
                "localhost",
            )
            .unwrap();
        conns.insert(
            ch,
            Conn {
                c,
                slots: Vec::new(),
                uni: Vec::new(),
                dec: hxlab_load::h3::ResponseDecoder::Static(hxlab_load::qpack::Decoder::new()),
                connected: false,
                dirty: true,
            },
        );
    }
    let mut started = 0u64;
    let mut done = 0u64;
    let mut body = 0u64;
    const BATCH: usize = quinn::udp::BATCH_SIZE;
    let seg = 1500usize;
    let mut bufs: Vec<BytesMut> = (0..BATCH).map(|_| BytesMut::new()).collect();
    let mut metas = [quinn::udp::RecvMeta::default(); BATCH];
    let mut txbuf = Vec::with_capacity(gso * seg);
    let mut respbuf = Vec::new();
    let mut control = vec![0x00u8];
    {
        let mut payload = Vec::new();
        for (id, v) in [(0x01u64, 0u64), (0x07, 0), (0x06, 256 * 1024)] {
            hxlab_load::h3::put_varint(&mut payload, id);
            hxlab_load::h3::put_varint(&mut payload, v);
        }
        control.push(0x04);
        hxlab_load::h3::put_varint(&mut control, payload.len() as u64);
        control.extend_from_slice(&payload);
    }

    let transmit = |conn: &mut Conn, now: Instant, txbuf: &mut Vec<u8>| loop {
        txbuf.clear();
        let Some(t) = conn.c.poll_transmit(now, gso, txbuf) else {
            break;
        };
        let tr = hxlab_load::h3::udp_transmit(&t, txbuf);
        loop {
            match state.send((&sock).into(), &tr) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let mut p = libc::pollfd {
                        fd: std::os::fd::AsRawFd::as_raw_fd(&sock),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    unsafe { libc::poll(&mut p, 1, 100) };
                }
                Err(e) => panic!("send: {e}"),
            }
        }
    };

    while done < total {
        let now = Instant::now();
        // Receive everything there is.
        loop {
            let mut iovs: Vec<IoSliceMut> = Vec::with_capacity(BATCH);
            for b in bufs.iter_mut() {
                b.clear();
                b.reserve(seg * gro);
                unsafe { b.set_len(seg * gro) };
            }
            for b in bufs.iter_mut() {
                iovs.push(IoSliceMut::new(&mut b[..]));
            }
            let n = match state.recv((&sock).into(), &mut iovs, &mut metas) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("recv: {e}"),
            };
            drop(iovs);
            for i in 0..n {
                let m = metas[i];
                let mut data = bufs[i].split_to(m.len);
                while !data.is_empty() {
                    let d = data.split_to(m.stride.min(data.len()));
                    let ecn = m
                        .ecn
                        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                    match ep.handle(now, m.addr, m.dst_ip, ecn, d, &mut respbuf) {
                        Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                            if let Some(c) = conns.get_mut(&ch) {
                                c.c.handle_event(ev);
                                c.dirty = true;
                            }
                        }
                        Some(DatagramEvent::Response(_))
                        | Some(DatagramEvent::NewConnection(_)) => {}
                        None => {}
                    }
                }
            }
        }
        let mut next_timeout: Option<Instant> = None;
        for (ch, conn) in conns.iter_mut() {
            if let Some(t) = conn.c.poll_timeout() {
                if t <= now {
                    conn.c.handle_timeout(now);
                    conn.dirty = true;
                }
            }
            if !conn.dirty {
                if let Some(t) = conn.c.poll_timeout() {
                    next_timeout = Some(next_timeout.map_or(t, |n| n.min(t)));
                }
                continue;
            }
            conn.dirty = false;
            if ack_first {
                transmit(conn, now, &mut txbuf);
            }
            while let Some(ev) = conn.c.poll_endpoint_events() {
                if let Some(cev) = ep.handle_event(*ch, ev) {
                    conn.c.handle_event(cev);
                }
            }
            while let Some(ev) = conn.c.poll() {
                match ev {
                    Event::Connected => {
                        conn.connected = true;
                        let id = conn.c.streams().open(Dir::Uni).unwrap();
                        conn.c.send_stream(id).write(&control).unwrap();
                    }
                    Event::ConnectionLost { reason } => panic!("lost: {reason}"),
                    Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                        while let Some(id) = conn.c.streams().accept(Dir::Uni) {
                            conn.uni.push(id);
                        }
                    }
                    Event::Stream(StreamEvent::Readable { id }) => {
                        if let Some(k) = conn.slots.iter().position(|s| s.0 == id) {
                            let mut fin = false;
                            {
                                let mut rs = conn.c.recv_stream(id);
                                let mut chunks = rs.read(true).unwrap();
                                loop {
                                    match chunks.next(usize::MAX) {
                                        Ok(Some(ch)) => conn.slots[k]
                                            .1
                                            .feed(&mut conn.dec, id.into(), &ch.bytes, now)
                                            .unwrap(),
                                        Ok(None) => {
                                            fin = true;
                                            break;
                                        }
                                        Err(quinn_proto::ReadError::Blocked) => break,
                                        Err(e) => panic!("read: {e}"),
                                    }
                                }
                                let _ = chunks.finalize();
                            }
                            if fin {
                                let (_, p) = conn.slots.swap_remove(k);
                                p.finish().unwrap();
                                assert_eq!(p.status, 200);
                                body += p.body;
                                done += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
            // Discard the server's unidirectional streams' bytes.
            for &id in &conn.uni {
                let mut rs = conn.c.recv_stream(id);
                if let Ok(mut chunks) = rs.read(true) {
                    while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                    let _ = chunks.finalize();
                };
            }
            if conn.connected {
                while conn.slots.len() < depth && started < total {
                    let Some(id) = conn.c.streams().open(Dir::Bi) else {
                        break;
                    };
                    let mut s = conn.c.send_stream(id);
                    let n = s.write(&request).unwrap();
                    assert_eq!(n, request.len());
                    s.finish().unwrap();
                    conn.slots.push((id, ResponseParser::default()));
                    started += 1;
                }
            }
            transmit(conn, now, &mut txbuf);
            if let Some(t) = conn.c.poll_timeout() {
                next_timeout = Some(next_timeout.map_or(t, |n| n.min(t)));
            }
        }
        if done >= total {
            break;
        }
        let wait_ms = next_timeout
            .map(|t| t.saturating_duration_since(Instant::now()).as_millis() as i32)
            .unwrap_or(1000)
            .max(0);
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&sock),
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, wait_ms) };
    }
    let wall = t0.elapsed();
    let (mut tx, mut rx) = (0, 0);
    for c in conns.values() {
        let s = c.c.stats();
        tx += s.udp_tx.datagrams;
        rx += s.udp_rx.datagrams;
    }
    let (user, sys) = hxlab_core::rusage::process_cpu();
    let cpu = user + sys;
    println!(
        "proto_h3 ack_first={ack_first}: {done} done, body {body}, cpu {:.2} us/req, {:.0} req/s, tx {:.3} rx {:.3} datagrams/req",
        cpu * 1e6 / done as f64,
        done as f64 / wall.as_secs_f64(),
        tx as f64 / done as f64,
        rx as f64 / done as f64
    );
}
