//! The origin's HTTP/1.1 request framer (`h1_request::HeadReader`) beside httparse (the
//! parser hyper uses, and the origin used until hyper was replaced), on the same request
//! heads: nanoseconds per head, best of several rounds, one core. Run by bench/framer.sh.
//!
//! Not the same work: httparse splits a head into its parts and checks their bytes; the
//! framer also reads what frames the request (Host, exactly one; Content-Length and
//! Transfer-Encoding, and their conflicts; Connection; Expect) and refuses ambiguous framing.
//! So a ratio above 1 is what that strictness costs; the origin calls the framer once per
//! request, and nothing else parses the head.
//!
//! Usage: framer_bench [ROUNDS] [ITERATIONS]   (defaults: 7 rounds of 2,000,000 heads)

use hxlab_wire::h1_request::HeadReader;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

/// The heads measured: what h2load and curl send in bench/origins.sh, and a browser's.
const HEADS: &[(&str, &[u8])] = &[
    (
        "h2load (origins h1 row)",
        b"GET /bytes/100 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: h2load nghttp2/1.52.0\r\n\
          Accept: */*\r\n\r\n",
    ),
    (
        "curl",
        b"GET /bytes/100 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\n\
          Accept: */*\r\n\r\n",
    ),
    (
        "Chromium page load",
        b"GET /assets/app.js?v=3f2a HTTP/1.1\r\nHost: www.example.test\r\nConnection: keep-alive\r\n\
          sec-ch-ua: \"Chromium\";v=\"130\", \"Not?A_Brand\";v=\"99\"\r\nsec-ch-ua-mobile: ?0\r\n\
          User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
          Chrome/130.0.0.0 Safari/537.36\r\nsec-ch-ua-platform: \"Linux\"\r\nAccept: */*\r\n\
          Sec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script\r\n\
          Referer: https://www.example.test/\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n\
          Accept-Language: en-US,en;q=0.9\r\nCookie: session=8c1d0e5f2b7a4c3e9d6f1a0b; theme=dark\r\n\r\n",
    ),
];

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut number = |default: u64, what: &str| -> Result<u64, String> {
        match args.next() {
            None => Ok(default),
            Some(a) => a.parse::<u64>().ok().filter(|&n| n > 0).ok_or(format!(
                "framer_bench: {what} must be a positive integer, not {a:?}"
            )),
        }
    };
    let (rounds, iterations) = match (number(7, "ROUNDS"), number(2_000_000, "ITERATIONS")) {
        (Ok(r), Ok(i)) => (r, i),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}\nusage: framer_bench [ROUNDS] [ITERATIONS]");
            return ExitCode::from(2);
        }
    };
    println!(
        "{:<24} {:>6} {:>14} {:>14} {:>9}",
        "head", "bytes", "hxlab ns/head", "httparse ns", "hx/peer"
    );
    for (name, head) in HEADS {
        // Both must read the whole head, the same length, or the comparison means nothing.
        let ours = HeadReader::default().read(head, 64 * 1024);
        let Ok(Some((used, _))) = ours else {
            eprintln!("framer_bench: the framer did not read the {name} head: {ours:?}");
            return ExitCode::FAILURE;
        };
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let theirs = httparse::Request::new(&mut fields).parse(head);
        if !matches!(theirs, Ok(httparse::Status::Complete(n)) if n == used) {
            eprintln!("framer_bench: httparse did not read the {name} head as {used} bytes");
            return ExitCode::FAILURE;
        }
        let hx = best(rounds, iterations, || {
            let mut reader = HeadReader::default();
            match reader.read(black_box(head), 64 * 1024) {
                Ok(Some((n, h))) => n + h.target.len(),
                _ => 0,
            }
        });
        let peer = best(rounds, iterations, || {
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut fields);
            match req.parse(black_box(head)) {
                Ok(httparse::Status::Complete(n)) => n + req.path.map_or(0, str::len),
                _ => 0,
            }
        });
        println!(
            "{name:<24} {:>6} {hx:>14.1} {peer:>14.1} {:>8.2}x",
            head.len(),
            hx / peer
        );
    }
    ExitCode::SUCCESS
}

/// The fastest of `rounds` rounds of `iterations` calls of `f`, in nanoseconds per call.
fn best(rounds: u64, iterations: u64, mut f: impl FnMut() -> usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut sink = 0usize;
        for _ in 0..iterations {
            sink = sink.wrapping_add(f());
        }
        black_box(sink);
        best = best.min(start.elapsed().as_nanos() as f64 / iterations as f64);
    }
    best
}
