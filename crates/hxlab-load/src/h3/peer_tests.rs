//! The whole client against a scripted HTTP/3 server written here on quinn (real QUIC and
//! TLS on loopback), for what `hxlab serve` never does: GOAWAY mid-connection and broken
//! responses.

use super::tests::{frame, section};
use super::*;
use crate::{LoadConfig, Proto};
use std::sync::mpsc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    /// Answer `n` requests per connection, then GOAWAY naming the next stream; later
    /// streams are held unanswered.
    GoawayAfter(usize),
    /// DATA before HEADERS (a connection error).
    DataFirst,
    /// A head without `:status` (a stream error).
    NoStatus,
    /// Answer normally, but with a fresh TLS session store for every connection: the
    /// client's tickets are never found, so its 0-RTT is always rejected.
    RejectEarlyData,
}

type Identity = (
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

fn identity() -> Identity {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
    (made.cert.der().clone(), key)
}

/// The counts of a result, for assertion messages (its histograms are too long).
fn brief(r: &hxlab_core::RunResult) -> String {
    format!(
        "started {} done {} failed {} errors {:?} connections {} resumed {} samples {:?}",
        r.requests_started,
        r.requests_done,
        r.requests_failed,
        r.errors,
        r.connections,
        r.resumed,
        r.error_samples
    )
}

/// TLS 1.3, ALPN h3, 0-RTT accepted from tickets this config issued.
fn server_config(id: &Identity) -> quinn::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![id.0.clone()], id.1.clone_key())
        .unwrap();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = u32::MAX;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    quinn::ServerConfig::with_crypto(Arc::new(crypto))
}

fn head(fields: &[(&str, &str)]) -> Vec<u8> {
    frame(HEADERS, &section(fields))
}

async fn serve_conn(conn: quinn::Connection, script: Script, codes: mpsc::Sender<u64>) {
    let Ok(mut control) = conn.open_uni().await else {
        return;
    };
    let mut hello = vec![0x00];
    hello.extend(frame(SETTINGS, &[0x01, 0x00]));
    if control.write_all(&hello).await.is_err() {
        return;
    }
    let mut held = Vec::new();
    let mut k = 0usize;
    loop {
        tokio::select! {
            accepted = conn.accept_bi() => {
                let (mut send, mut recv) = match accepted {
                    Ok(pair) => pair,
                    Err(quinn::ConnectionError::ApplicationClosed(c)) => {
                        let _ = codes.send(c.error_code.into_inner());
                        break;
                    }
                    Err(_) => break,
                };
                let id = u64::from(send.id());
                if let Script::GoawayAfter(n) = script {
                    if k == n {
                        let mut g = Vec::new();
                        put_varint(&mut g, id);
                        let _ = control.write_all(&frame(GOAWAY, &g)).await;
                    }
                    if k >= n {
                        held.push((send, recv));
                        k += 1;
                        continue;
                    }
                }
                k += 1;
                tokio::spawn(async move {
                    if recv.read_to_end(1 << 20).await.is_err() {
                        return;
                    }
                    let mut out = match script {
                        Script::GoawayAfter(_) | Script::RejectEarlyData => {
                            head(&[(":status", "200")])
                        }
                        Script::DataFirst => frame(DATA, b"early"),
                        Script::NoStatus => head(&[("server", "scripted")]),
                    };
                    out.extend(frame(DATA, b"0123456789"));
                    let _ = send.write_all(&out).await;
                    let _ = send.finish();
                    let _ = send.stopped().await;
                });
            }
            closed = conn.closed() => {
                if let quinn::ConnectionError::ApplicationClosed(c) = closed {
                    let _ = codes.send(c.error_code.into_inner());
                }
                break;
            }
        }
    }
    drop(held);
}

/// Runs the scripted server and `hxlab load` against it; returns the result and the
/// application close codes the server saw.
fn against(script: Script, n: u64, depth: u64) -> (hxlab_core::RunResult, Vec<u64>) {
    against_with(script, n, depth, |_| {})
}

fn against_with(
    script: Script,
    n: u64,
    depth: u64,
    tweak: impl FnOnce(&mut LoadConfig),
) -> (hxlab_core::RunResult, Vec<u64>) {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (codes_tx, codes_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let id = identity();
            let ep = quinn::Endpoint::server(server_config(&id), "127.0.0.1:0".parse().unwrap())
                .unwrap();
            addr_tx.send(ep.local_addr().unwrap()).unwrap();
            let mut stop = stop_rx;
            loop {
                tokio::select! {
                    inc = ep.accept() => {
                        let Some(inc) = inc else { break };
                        if script == Script::RejectEarlyData {
                            ep.set_server_config(Some(server_config(&id)));
                        }
                        let codes = codes_tx.clone();
                        tokio::spawn(async move {
                            if let Ok(conn) = inc.await {
                                serve_conn(conn, script, codes).await;
                            }
                        });
                    }
                    _ = &mut stop => break,
                }
            }
            ep.close(quinn::VarInt::from_u32(0), b"");
        });
    });
    let addr = addr_rx.recv().unwrap();
    let mut cfg = LoadConfig {
        urls: vec![format!("https://{addr}/x")],
        requests: n,
        clients: 1,
        max_concurrent_streams: depth,
        proto: Proto::H3,
        insecure: true,
        timeout: Duration::from_secs(10),
        ..Default::default()
    };
    tweak(&mut cfg);
    let result = crate::run(cfg).expect("run");
    // Give the server a moment to see the last close.
    std::thread::sleep(Duration::from_millis(200));
    let _ = stop_tx.send(());
    server.join().unwrap();
    (result, codes_rx.try_iter().collect())
}

#[test]
fn goaway_finishes_streams_below_its_id_and_resends_the_rest() {
    let (r, codes) = against(Script::GoawayAfter(3), 20, 4);
    assert_eq!(r.requests_done, 20, "{}", brief(&r));
    assert_eq!(r.requests_started, 20, "{}", brief(&r));
    assert_eq!(r.requests_failed, 0, "{}", brief(&r));
    assert_eq!(r.errors.total(), 0, "{}", brief(&r));
    // Three answers per connection.
    assert!(r.connections >= 7, "{}", r.connections);
    assert_eq!(r.bytes.body_received, 200);
    assert!(codes.iter().all(|c| *c == H3_NO_ERROR), "{codes:?}");
}

#[test]
fn data_before_headers_closes_the_connection_with_frame_unexpected() {
    let (r, codes) = against(Script::DataFirst, 6, 2);
    assert_eq!(r.requests_done, 0, "{}", brief(&r));
    assert!(r.errors.protocol >= 1, "{}", brief(&r));
    assert!(codes.contains(&H3_FRAME_UNEXPECTED), "{codes:?}");
}

#[test]
fn a_head_without_status_fails_only_its_stream() {
    let (r, _) = against(Script::NoStatus, 5, 2);
    assert_eq!(r.requests_done, 0, "{}", brief(&r));
    assert_eq!(r.errors.protocol, 5, "{}", brief(&r));
    assert_eq!(r.connections, 1, "{}", brief(&r));
}

#[test]
fn rejected_0rtt_requests_are_sent_again_in_1rtt() {
    let (r, _) = against_with(Script::RejectEarlyData, 6, 1, |c| {
        c.zero_rtt = true;
        c.no_keepalive = true;
    });
    assert_eq!(r.requests_done, 6, "{}", brief(&r));
    assert_eq!(r.requests_started, 6, "{}", brief(&r));
    assert_eq!(r.errors.total(), 0, "{}", brief(&r));
    assert_eq!(r.connections, 6, "{}", brief(&r));
    // Every handshake was full: nothing was resumed or accepted early.
    assert_eq!(r.resumed, 0, "{}", brief(&r));
}
