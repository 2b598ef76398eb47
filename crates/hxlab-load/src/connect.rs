//! A client's connections: the connector a run uses ([`Connector`], built once from the
//! configuration), and each client's loop ([`client_loop`]): dial, count the connection,
//! pick the protocol's session ([`H1Session`], [`H2Session`], [`crate::h3::session`]), run it
//! through [`drive`], reconnect or give up.
//!
//! Between the worker (which starts the clients) and the sessions (which know nothing of
//! dialing): imports the sessions, never the worker.

use crate::client::{ClientCtx, SessionEnd};
use crate::h1::H1Session;
use crate::h2::H2Session;
use crate::h3::QuicDialer;
use crate::net::{ConnectInfo, Dialer, SharedTap};
use crate::plan::Next;
use crate::recorder::ErrorKind;
use crate::session::{drive, Tcp};
use crate::target::Target;
use crate::{tls, LoadConfig, LoadError, Proto};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// Which session runs on a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpSession {
    /// HTTP/1.1 (plain or TLS).
    H1,
    /// h2c prior knowledge.
    H2c,
    /// TLS, and ALPN must say h2.
    H2,
    /// TLS, whatever ALPN says (h2 or HTTP/1.1).
    Auto,
}

/// How a worker's clients reach the server: TCP (with the session to run on it) or QUIC.
#[derive(Clone)]
pub(crate) enum Connector {
    Tcp {
        dialer: Dialer,
        session: TcpSession,
    },
    Quic {
        configs: tls::QuicConfigs,
        server_name: String,
        /// An observer of the connection (`hxlab trace`).
        tap: Option<SharedTap>,
    },
}

/// The connector for `cfg`'s protocol and URL scheme (TLS and ALPN offer included), with
/// `tap` watching its connections; `Err` for a protocol the scheme cannot carry.
pub(crate) fn connector(
    cfg: &LoadConfig,
    target: &Target,
    tap: Option<&SharedTap>,
) -> Result<Connector, LoadError> {
    if let (Some(cc), false) = (cfg.cc, cfg.proto == Proto::H3) {
        // Every connection would fail to set it: say so once, before the run.
        hxlab_core::cc::settable(cc).map_err(|e| LoadError::Config(format!("--cc: {e}")))?;
    }
    let dialer = Dialer {
        tfo: cfg.tfo,
        addr: target.addr,
        tls: None,
        cc: cfg.cc,
        limit: cfg.connect_timeout,
        tap: tap.cloned(),
    };
    let alpn_owned: Option<Vec<Vec<u8>>> = cfg
        .alpn_list
        .as_ref()
        .map(|l| l.iter().map(|s| s.as_bytes().to_vec()).collect());
    let offer = |default: &[&[u8]]| -> Vec<Vec<u8>> {
        alpn_owned
            .clone()
            .unwrap_or_else(|| default.iter().map(|p| p.to_vec()).collect())
    };
    // `--sni` names the server in the handshake (and the certificate check) instead of
    // the URL's host; the URL's authority stays in Host and :authority.
    let sni = cfg.sni.clone().unwrap_or_else(|| target.host.clone());
    let with_tls = |alpn: Vec<Vec<u8>>, session| -> Result<Connector, LoadError> {
        let refs: Vec<&[u8]> = alpn.iter().map(|v| v.as_slice()).collect();
        let config = tls::tcp_config(cfg, &refs)?;
        let name = tls::server_name(&sni)?;
        Ok(Connector::Tcp {
            dialer: dialer.clone().with_tls(config, name),
            session,
        })
    };
    // h2load's `-p`: what auto speaks without TLS.
    let cleartext = match cfg.no_tls_proto {
        Some(Proto::H2c) => TcpSession::H2c,
        _ => TcpSession::H1,
    };
    match (cfg.proto, target.https) {
        (Proto::Auto, false) => Ok(Connector::Tcp {
            dialer,
            session: cleartext,
        }),
        (Proto::H1, false) => Ok(Connector::Tcp {
            dialer,
            session: TcpSession::H1,
        }),
        (Proto::H1, true) => with_tls(offer(&[b"http/1.1"]), TcpSession::H1),
        (Proto::H2, false) | (Proto::H2c, false) => Ok(Connector::Tcp {
            dialer,
            session: TcpSession::H2c,
        }),
        (Proto::H2, true) => with_tls(offer(&[b"h2"]), TcpSession::H2),
        (Proto::Auto, true) => with_tls(offer(&[b"h2", b"http/1.1"]), TcpSession::Auto),
        (Proto::H2c, true) => Err(LoadError::Config(
            "h2c is HTTP/2 over cleartext: use an http:// URL".into(),
        )),
        (Proto::H3, false) => Err(LoadError::Config(
            "h3 runs over QUIC with TLS: use an https:// URL".into(),
        )),
        (Proto::H3, true) => Ok(Connector::Quic {
            configs: tls::quic_config(cfg)?,
            server_name: sni,
            tap: tap.cloned(),
        }),
    }
}

/// What a client keeps across its connections, so a new connection allocates little.
struct ClientBuffers {
    /// The TCP read buffer for bytes left over between reads (h1 and h2; empty while
    /// nothing is, see [`crate::session`]).
    read: Vec<u8>,
    /// The HTTP/1.1 session (its write buffer and pipeline).
    h1: Option<H1Session>,
    /// What ALPN chose on this client's last full handshake: with `--proto auto` and early
    /// data, the session must start before ALPN is known, on the protocol of the session
    /// being resumed.
    last_h2: Rc<Cell<Option<bool>>>,
}

/// Connects, runs sessions and reconnects until the plan is done or connecting fails.
/// Returns the number of open-model requests left unsent (0 in the closed model).
pub(crate) async fn client_loop(
    mut ctx: ClientCtx,
    connector: Connector,
    quic: Option<QuicDialer>,
) -> u64 {
    let mut bufs = ClientBuffers {
        read: Vec::new(),
        h1: None,
        last_h2: Rc::new(Cell::new(None)),
    };
    let mut empty_sessions = 0u32;
    loop {
        if !ctx.has_reservation() {
            match ctx.plan.next(Instant::now()) {
                Next::Done => return 0,
                Next::Go { scheduled, ticket } => ctx.reserve(scheduled, ticket),
                // A new connection per request opens when the request is due (its latency
                // includes the connection, as for a new visitor); a kept-alive one at once.
                Next::Wait(t) if ctx.no_keepalive => {
                    crate::precise_sleep::sleep_until(t).await;
                    continue;
                }
                Next::Wait(_) => {}
            }
        }
        let measure_start = ctx.rec.borrow().measure_start;
        ctx.rec
            .borrow_mut()
            .clients
            .connecting(ctx.index, Instant::now(), measure_start);
        let end = match &connector {
            Connector::Tcp { dialer, session } => {
                tcp_connection(&mut ctx, dialer, *session, &mut bufs).await
            }
            Connector::Quic { .. } => quic_connection(&mut ctx, quic.as_ref()).await,
        };
        ctx.rec
            .borrow_mut()
            .clients
            .disconnected(ctx.index, Instant::now());
        let Some(end) = end else {
            // Connecting failed (counted): this client gives up.
            ctx.unreserve();
            return ctx.unsent();
        };
        ctx.unreserve();
        if tapped(&connector) || ctx.retired {
            // A traced run is one connection; a client whose connection timed out (-T, -N)
            // is done, as in h2load.
            return ctx.unsent();
        }
        match end {
            SessionEnd::PlanDone => return 0,
            SessionEnd::Closed { answered } | SessionEnd::Failed { answered, .. } => {
                // A server that keeps closing connections without answering would make the
                // client spin: give up after three such connections in a row.
                if answered > 0 {
                    empty_sessions = 0;
                    continue;
                }
                empty_sessions += 1;
                if empty_sessions >= 3 {
                    if let SessionEnd::Failed { message, .. } = &end {
                        let mut rec = ctx.rec.borrow_mut();
                        if rec.first_connect_error.is_none() {
                            rec.first_connect_error = Some(message.clone());
                        }
                    }
                    return ctx.unsent();
                }
            }
        }
    }
}

/// Whether a tap watches this client's connections (`hxlab trace`).
pub(crate) fn tapped(connector: &Connector) -> bool {
    match connector {
        Connector::Tcp { dialer, .. } => dialer.tap.is_some(),
        Connector::Quic { tap, .. } => tap.is_some(),
    }
}

/// Which protocol runs on a TCP connection, from what was asked and what ALPN said (or, on
/// early data, what the resumed session had). `Err`: h2 was required and not negotiated.
fn tcp_protocol(
    session: TcpSession,
    info: &ConnectInfo,
    last_h2: &Cell<Option<bool>>,
    addr: std::net::SocketAddr,
) -> Result<bool, String> {
    let is_h2 = if info.early {
        match session {
            TcpSession::Auto => last_h2.get().unwrap_or(true),
            s => s != TcpSession::H1,
        }
    } else {
        let h2 = info.alpn.as_deref() == Some(b"h2");
        last_h2.set(Some(h2));
        h2
    };
    match session {
        TcpSession::H1 => Ok(false),
        TcpSession::H2c => Ok(true),
        TcpSession::Auto => Ok(is_h2),
        TcpSession::H2 if is_h2 => Ok(true),
        TcpSession::H2 => {
            let chose = match &info.alpn {
                Some(p) => String::from_utf8_lossy(p).into_owned(),
                None => "none".to_string(),
            };
            Err(format!(
                "{addr} did not negotiate h2 by ALPN (server chose {chose}); it may speak only HTTP/1.1: try --proto h1 or auto"
            ))
        }
    }
}

/// One TCP connection: dial, count the connection, run an h1 or h2 session through the
/// client loop. `None` when connecting failed (counted).
async fn tcp_connection(
    ctx: &mut ClientCtx,
    dialer: &Dialer,
    session: TcpSession,
    bufs: &mut ClientBuffers,
) -> Option<SessionEnd> {
    let (mut stream, info) = match dialer.dial().await {
        Ok(x) => x,
        Err(e) => {
            ctx.rec.borrow_mut().connect_failed(e.kind, &e);
            return None;
        }
    };
    let run_h2 = match tcp_protocol(session, &info, &bufs.last_h2, dialer.addr) {
        Ok(h2) => h2,
        Err(msg) => {
            ctx.rec
                .borrow_mut()
                .connect_failed(ErrorKind::Protocol, &msg);
            return None;
        }
    };
    let negotiated = match (run_h2, session) {
        (true, TcpSession::H2c) => "h2c",
        (true, _) => "h2",
        (false, _) => "http/1.1",
    };
    if info.early {
        // Counted when the handshake completes, with what it turned out to be.
        let (rec, cc, t_connect, last_h2) = (
            ctx.rec.clone(),
            info.cc.clone(),
            info.connect,
            bufs.last_h2.clone(),
        );
        stream.on_handshake(move |o| {
            let h2 = o.alpn.as_deref() == Some(b"h2");
            last_h2.set(Some(h2));
            let mut rec = rec.borrow_mut();
            rec.connected(
                Some(t_connect),
                Some(o.handshake),
                o.resumed,
                negotiated,
                o.tls_version,
                cc.as_deref(),
            );
            rec.early_data(negotiated, o.accepted);
        });
    } else {
        record_connected(ctx, &info, negotiated);
    }
    let end = if run_h2 {
        let mut s = H2Session::new(ctx, session == TcpSession::H2c);
        let mut io = Tcp::new::<H2Session>(&mut stream, &mut bufs.read);
        drive(ctx, &mut s, &mut io).await
    } else {
        let s = bufs.h1.get_or_insert_with(|| H1Session::new(ctx.h1_depth));
        s.start(ctx);
        let mut io = Tcp::new::<H1Session>(&mut stream, &mut bufs.read);
        drive(ctx, s, &mut io).await
    };
    if let Some(acked) = info.syn_data.as_ref().and_then(|s| s.get()) {
        ctx.rec.borrow_mut().syn_data(negotiated, acked);
    }
    Some(end)
}

/// One QUIC connection: dial, count the connection (at once, or when 0-RTT is settled),
/// run the h3 session. `None` when connecting failed (counted).
async fn quic_connection(ctx: &mut ClientCtx, dialer: Option<&QuicDialer>) -> Option<SessionEnd> {
    let dialer = dialer?;
    let dial = dialer.dial(ctx.index, ctx.quic_dials);
    ctx.quic_dials += 1;
    let mut qc = match dial.await {
        Ok(c) => c,
        Err(e) => {
            ctx.rec.borrow_mut().connect_failed(e.kind, &e);
            return None;
        }
    };
    let resumed = qc.resumed();
    if let Some(tap) = &ctx.tap {
        tell_quic_facts(tap, &qc, dialer, resumed);
    }
    if !qc.zero_rtt {
        ctx.rec.borrow_mut().connected(
            None,
            Some(qc.handshake),
            resumed,
            "h3",
            Some("TLSv1.3"),
            Some(qc.conn.congestion_controller()),
        );
    } else {
        // 0-RTT: requests go out at once; whether the server took them is known later,
        // and the connection is counted then. Accepted 0-RTT is a resumption; rejected
        // 0-RTT may still have resumed the session (the handshake is complete by then,
        // unless the connection died).
        let rec = ctx.rec.clone();
        let t0 = Instant::now() - qc.handshake;
        let conn = qc.conn.clone();
        let check = qc.cert_check.clone();
        tokio::task::spawn_local(async move {
            let ok = conn.zero_rtt_accepted().await;
            let resumed =
                ok || (conn.close_reason().is_none() && check.is_some_and(|c| !c.verified()));
            rec.borrow_mut().early_data("h3", ok);
            rec.borrow_mut().connected(
                None,
                Some(t0.elapsed()),
                resumed,
                "h3",
                Some("TLSv1.3"),
                Some(conn.congestion_controller()),
            );
        });
    }
    // With --qlog (and no tap of `hxlab trace`), the session's bytes go to the qlog's
    // HTTP/3 events for this connection only.
    let logged = ctx.tap.is_none() && qc.qlog.is_some();
    if let Some(events) = qc.qlog.take().filter(|_| logged) {
        ctx.tap = Some(std::sync::Arc::new(std::sync::Mutex::new(
            Box::new(events) as Box<dyn hxlab_wire::Tap>
        )));
    }
    let end = crate::h3::session(ctx, qc.conn).await;
    if logged {
        ctx.tap = None;
    }
    Some(end)
}

/// Tells the tap what a QUIC connection's handshake established.
fn tell_quic_facts(
    tap: &SharedTap,
    qc: &crate::h3::QuicConnection,
    dialer: &QuicDialer,
    resumed: bool,
) {
    let alpn = qc
        .conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol.map(|p| String::from_utf8_lossy(&p).into_owned()));
    let facts = hxlab_wire::tap::TransportFacts {
        transport: "QUIC",
        peer: dialer.addr.to_string(),
        handshake_us: Some(qc.handshake.as_micros() as u64),
        tls_version: Some("TLSv1.3".into()),
        alpn,
        alpn_offered: vec!["h3".into()],
        resumed,
        rtt_us: Some(qc.conn.rtt().as_micros() as u64),
        ..Default::default()
    };
    crate::net::with_tap(tap, |t| t.connected(&facts));
}

/// Counts a connection whose handshake completed before the session started.
fn record_connected(ctx: &ClientCtx, info: &ConnectInfo, negotiated: &'static str) {
    ctx.rec.borrow_mut().connected(
        Some(info.connect),
        info.handshake,
        info.resumed,
        negotiated,
        info.tls_version,
        info.cc.as_deref(),
    );
}
