//! The origin as a library: `hxlab_serve::start` on the test's own tokio runtime (no
//! subprocess, no ready file), driven by hxlab-load's engine in the same process over every
//! protocol, its own counters read through `RunningServer::stats`, then shut down. What the
//! `hxlab serve` command adds (flags, the ready file, signals) is tested in tests/serve.rs.

use hxlab_contract::{LoadConfig, ServeConfig};
use hxlab_core::cc::CongestionControl;
use hxlab_core::Proto;

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
    for p in ["h1", "h1-tls", "h2", "h2c", "h3"] {
        let s = stats.by_protocol.get(p).cloned().unwrap_or_default();
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
