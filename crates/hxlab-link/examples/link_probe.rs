//! Traffic tool for bench/link.sh (std and libc only, bounded in time): a UDP echo server and RTT
//! probe, and a TCP sink/source measuring goodput.
//!
//! link_probe udp-echo PORT SECS            echo datagrams for SECS seconds
//! link_probe udp-rtt HOST PORT N           N sequential probes; prints p10/p50/p90 in µs
//! link_probe tcp-sink PORT SECS            accept one connection, count bytes, print Mbit/s
//! link_probe tcp-send HOST PORT SECS       send as fast as possible for SECS seconds
//! link_probe tcp-recv HOST PORT SECS       connect and read for SECS; print Mbit/s
//! link_probe tcp-source PORT SECS [SNDBUF]  accept one connection and write for SECS; with
//!                                          SNDBUF, force that send buffer (root: SO_SNDBUFFORCE,
//!                                          past net.core.wmem_max, this socket only)
//! link_probe udp-count PORT SECS           count datagrams received
//! link_probe udp-blast HOST PORT N         send N datagrams, paced

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_else(|| {
        eprintln!("usage: see the source of link_probe");
        std::process::exit(2)
    })
}

fn num(i: usize) -> u64 {
    arg(i).parse().unwrap_or_else(|_| {
        eprintln!("argument {i} must be a number");
        std::process::exit(2)
    })
}

/// Sets the socket's send buffer past the sysctl limits (needs CAP_NET_ADMIN): a long fat
/// path needs more data in flight than the default 4 MiB tcp_wmem allows.
fn force_sndbuf(c: &TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads an int through the pointer, valid across the call.
    let r = unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &bytes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        eprintln!("SO_SNDBUFFORCE: {}", std::io::Error::last_os_error());
    }
}

/// Reads until the peer closes or the read times out: the bytes, and the seconds from the first
/// byte to the last (a connection cut without FIN does not count its timeout).
fn read_all(c: &mut TcpStream) -> (u64, f64) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        total += n as u64;
    }
    let secs = first
        .map(|f| (last - f).as_secs_f64())
        .unwrap_or(1.0)
        .max(1e-3);
    (total, secs)
}

/// Writes as fast as the connection takes until `end` or the first error.
fn write_until(c: &mut TcpStream, end: Instant) {
    let buf = vec![1u8; 256 * 1024];
    while Instant::now() < end {
        if c.write_all(&buf).is_err() {
            break;
        }
    }
}

fn main() {
    let mode = arg(1);
    match mode.as_str() {
        "udp-echo" => {
            let s = UdpSocket::bind(("0.0.0.0", num(2) as u16)).expect("bind");
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let end = Instant::now() + Duration::from_secs(num(3));
            let mut buf = [0u8; 2048];
            while Instant::now() < end {
                if let Ok((n, a)) = s.recv_from(&mut buf) {
                    let _ = s.send_to(&buf[..n], a);
                }
            }
        }
        "udp-rtt" => {
            let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let dest = (arg(2), num(3) as u16);
            let n = num(4);
            let mut rtts = Vec::new();
            let mut buf = [0u8; 2048];
            for i in 0..n {
                let t = Instant::now();
                let _ = s.send_to(&i.to_be_bytes(), (dest.0.as_str(), dest.1));
                if s.recv_from(&mut buf).is_ok() {
                    rtts.push(t.elapsed().as_secs_f64() * 1e6);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            rtts.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| {
                rtts.get(((rtts.len() as f64 - 1.0) * p) as usize)
                    .copied()
                    .unwrap_or(f64::NAN)
            };
            println!(
                "n={} p10_us={:.1} p50_us={:.1} p90_us={:.1}",
                rtts.len(),
                q(0.1),
                q(0.5),
                q(0.9)
            );
        }
        "tcp-sink" => {
            let l = TcpListener::bind(("0.0.0.0", num(2) as u16)).expect("bind");
            let (mut c, _) = l.accept().expect("accept");
            c.set_read_timeout(Some(Duration::from_secs(num(3))))
                .unwrap();
            let (total, secs) = read_all(&mut c);
            println!(
                "bytes={total} secs={secs:.3} mbit_s={:.1}",
                total as f64 * 8.0 / secs / 1e6
            );
        }
        "tcp-send" => {
            let mut c = TcpStream::connect((arg(2).as_str(), num(3) as u16)).expect("connect");
            let end = Instant::now() + Duration::from_secs(num(4));
            write_until(&mut c, end);
        }
        "tcp-source" => {
            let l = TcpListener::bind(("0.0.0.0", num(2) as u16)).expect("bind");
            let (mut c, _) = l.accept().expect("accept");
            if std::env::args().nth(4).is_some() {
                force_sndbuf(&c, num(4) as libc::c_int);
            }
            let end = Instant::now() + Duration::from_secs(num(3));
            write_until(&mut c, end);
        }
        "tcp-recv" => {
            let mut c = TcpStream::connect((arg(2).as_str(), num(3) as u16)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(num(4) + 5)))
                .unwrap();
            let (total, secs) = read_all(&mut c);
            println!(
                "bytes={total} secs={secs:.3} mbit_s={:.2}",
                total as f64 * 8.0 / secs / 1e6
            );
        }
        "udp-count" => {
            let s = UdpSocket::bind(("0.0.0.0", num(2) as u16)).expect("bind");
            s.set_read_timeout(Some(Duration::from_millis(1000)))
                .unwrap();
            let end = Instant::now() + Duration::from_secs(num(3));
            let mut buf = [0u8; 2048];
            let mut n = 0u64;
            while Instant::now() < end {
                if s.recv_from(&mut buf).is_ok() {
                    n += 1;
                } else if n > 0 {
                    break;
                }
            }
            println!("received={n}");
        }
        "udp-blast" => {
            let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
            let n = num(4);
            for i in 0..n {
                let _ = s.send_to(&i.to_be_bytes(), (arg(2).as_str(), num(3) as u16));
                if i % 20 == 19 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            println!("sent={n}");
        }
        _ => {
            eprintln!("unknown mode {mode}");
            std::process::exit(2)
        }
    }
}
