//! The origin as a library: `hxlab_serve::start` on the test's own tokio runtime (no
//! subprocess, no ready file), driven by hxlab-load's engine in the same process over every
//! protocol, its own counters read through `RunningServer::stats`, then shut down. What the
//! `hxlab serve` command adds (flags, the ready file, signals) is tested in tests/serve.rs.

use hxlab_contract::{LoadConfig, ServeConfig, StatsSnapshot};
use hxlab_core::cc::CongestionControl;
use hxlab_core::{Proto, Protocol};

fn serve_config() -> ServeConfig {
    ServeConfig {
        tls_port: 0,
        plain_port: 0,
        threads: 1,
        cc: Some(CongestionControl::Cubic),
        ..ServeConfig::default()
    }
}

#[test]
fn start_serves_every_protocol_in_process_and_counts_exactly() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt
        .block_on(hxlab_serve::start(serve_config()))
        .expect("the origin starts in-process");
    let tls = server.tls_addr();
    let plain = server.plain_addr();
    let h3 = server.h3_addr().expect("HTTP/3 listens by default");
    assert_eq!(h3.port(), tls.port(), "HTTP/3 shares the TLS port's number");
    // Exact counts: 5 protocols × 40 requests of 1 KiB, each checked by the client.
    let runs = [
        (Proto::H1, format!("http://{plain}/bytes/1024")),
        (Proto::H1, format!("https://{tls}/bytes/1024")),
        (Proto::H2, format!("https://{tls}/bytes/1024")),
        (Proto::H2c, format!("http://{plain}/bytes/1024")),
        (Proto::H3, format!("https://{tls}/bytes/1024")),
    ];
    for (proto, url) in &runs {
        let cfg = LoadConfig {
            urls: vec![url.clone()],
            requests: 40,
            clients: 2,
            max_concurrent_streams: 4,
            insecure: true,
            proto: *proto,
            cc: Some(CongestionControl::Cubic),
            ..LoadConfig::default()
        };
        let result = hxlab_load::run(cfg).unwrap_or_else(|e| panic!("{proto} {url}: {e}"));
        assert_eq!(result.requests_succeeded, 40, "{proto} {url}");
        assert_eq!(result.bytes.body_received, 40 * 1024, "{proto} {url}");
        // What the client ran, read back from its own connections.
        assert_eq!(
            result.congestion_control.keys().collect::<Vec<_>>(),
            vec!["cubic"],
            "{proto} {url}"
        );
    }
    let stats = server.stats();
    for p in Protocol::ALL {
        let s = stats.protocol(p).cloned().unwrap_or_default();
        assert_eq!(s.requests, 40, "{p}: {:?}", stats.by_protocol);
        assert_eq!(s.body_bytes, 40 * 1024, "{p}");
        // The server's end ran what it was given, read back from each connection.
        assert_eq!(s.cc.keys().collect::<Vec<_>>(), vec!["cubic"], "{p}");
    }
    assert_eq!(stats.total.requests, 5 * 40);
    rt.block_on(server.shutdown());
}

#[test]
fn a_config_no_server_can_run_is_refused_before_binding() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (cfg, want) in [
        (
            ServeConfig {
                max_streams: 0,
                ..serve_config()
            },
            "--max-streams",
        ),
        (
            ServeConfig {
                quic_window: 1,
                ..serve_config()
            },
            "--quic-window",
        ),
    ] {
        let e = rt
            .block_on(hxlab_serve::start(cfg))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// The body of `GET path` on `addr` over HTTP/1.1 (`Connection: close`, a Content-Length
/// body as the server sends small replies).
fn get_body(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).expect("connect to the plain port");
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    c.read_to_string(&mut text).expect("read the reply");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("a Content-Length");
    assert_eq!(body.len(), len, "{head}");
    body.to_string()
}

/// A real `/stats` body reads into `StatsSnapshot` and writes back byte for byte, and its
/// shape is the one reports and scripts rely on: every field present in this order, no
/// null, every protocol listed. A field the type drops, renames, reorders, defaults, or
/// writes as null instead of leaving out (or the reverse) fails here.
#[test]
fn a_real_stats_body_round_trips_through_the_contract_type() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt
        .block_on(hxlab_serve::start(ServeConfig {
            h3: false,
            ..serve_config()
        }))
        .expect("the origin starts in-process");
    let plain = server.plain_addr();
    // One counted request, so a controller shows up in `cc` (empty maps are written too).
    let served = get_body(plain, "/bytes/10");
    assert_eq!(served.len(), 10);
    let body = get_body(plain, "/stats");
    let typed = StatsSnapshot::from_json(&body).expect("a /stats document");
    assert_eq!(typed.to_json(), body, "the type changes the body");
    assert_eq!(typed.protocol(Protocol::H1).map(|p| p.requests), Some(1));
    assert_eq!(
        typed.total.cc.keys().collect::<Vec<_>>(),
        ["cubic"],
        "{body}"
    );
    // The shape itself, every number zeroed: names, order, and no null or left-out field.
    // `notsent_lowat`: the mark read back from the one socket (16 KiB, the default).
    // `latency`: the one counted request in one of the 17 buckets; none elsewhere.
    let counters = |cc: &str, lowat: &str, counts: &str| {
        format!(
            "{{\"requests\":0,\"body_bytes\":0,\"connections\":0,\"open_connections\":0,\
             \"early_data_accepted\":0,\"tfo_accepted\":0,\"retries\":0,\"refused\":0,\
             \"cc\":{{{cc}}},\"notsent_lowat\":{{{lowat}}},\"priorities\":{{}},\"priority_signals\":{{}},\
             \"response_header_bytes\":0,\"request_header_bytes\":0,\"encoder_tables\":{{}},\
             \"latency\":{{\"counts\":[{counts}],\"sum_us\":0}}}}"
        )
    };
    let buckets = vec!["0"; hxlab_contract::SERVE_LATENCY_BUCKETS_US.len() + 1].join(",");
    let (used, unused) = (
        counters("\"cubic\":0", "\"16384\":0", &buckets),
        counters("", "", ""),
    );
    let golden = format!(
        "{{\"uptime_s\":0,\"cpu_user_s\":0,\"cpu_sys_s\":0,\"by_protocol\":{{\
         \"h1\":{used},\"h1-tls\":{unused},\"h2\":{unused},\"h2c\":{unused},\"h3\":{unused}}},\
         \"total\":{used},\"scheduler\":\"rfc9218\",\"h3_qpack\":{{\
         \"request_header_bytes\":0,\"response_header_bytes\":0,\"dynamic_refs_decoded\":0,\
         \"dynamic_refs_encoded\":0,\"inserts_received\":0,\"inserts_made\":0,\
         \"blocked_streams\":0,\"blocked_resets\":0,\"table_capacity\":0,\
         \"blocked_streams_allowed\":0,\"client_settings\":{{}}}}}}"
    );
    assert_eq!(zero_numbers(&body), golden);
    rt.block_on(server.shutdown());
}

/// `text` with every number that is a value (right after a `:`, or an array's element)
/// written as `0`.
fn zero_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if matches!(c, ':' | '[' | ',')
            && chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || *d == '-')
        {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || "+-.eE".contains(*d))
            {
                chars.next();
            }
            out.push('0');
        }
    }
    out
}
