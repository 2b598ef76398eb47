//! Workers: `-t` OS threads, each a current-thread tokio runtime running its share of the
//! connections; each client's connection loop (connect, count the connection, pick the
//! protocol's [`crate::session::Session`] and run it through [`crate::session::drive`],
//! reconnect or give up); and [`run`], which starts the workers and merges what they
//! recorded.

use crate::h1::H1Session;
use crate::h2::H2Session;
use crate::h3::QuicDialer;
use crate::net::{ConnectInfo, Dialer};
use crate::plan::{Next, OpenLedger, Plan, SharedLedger};
use crate::recorder::{ErrorKind, Recorder, SharedRecorder};
use crate::scheduler::Schedule;
use crate::session::{drive, Tcp};
use crate::target::Target;
use crate::{tls, LoadConfig, LoadError, Proto};
use hxlab_core::result::RunConfig;
use hxlab_core::RunResult;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a session ended.
#[derive(Debug)]
pub enum SessionEnd {
    /// The client has nothing more to send.
    PlanDone,
    /// The connection was closed in an orderly way (server `Connection: close`, GOAWAY,
    /// `--no-keepalive`); the client may open another.
    Closed {
        /// Responses received on the connection.
        answered: u64,
    },
    /// The connection failed; failed requests were already counted.
    Failed {
        /// Responses received before the failure.
        answered: u64,
        /// What went wrong.
        kind: ErrorKind,
        /// One line for the user.
        message: String,
    },
}

/// One client (connection slot): what it sends, where it counts.
pub struct ClientCtx {
    /// The target.
    pub target: Rc<Target>,
    /// The worker's recorder.
    pub rec: SharedRecorder,
    /// What to send next and when.
    pub plan: Plan,
    /// Streams (h2/h3) or pipelined requests (h1) in flight per connection.
    pub depth: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Connect/handshake timeout.
    pub connect_timeout: Duration,
    /// One request per connection.
    pub no_keepalive: bool,
    /// HTTP/2: accept server push (SETTINGS_ENABLE_PUSH=1).
    pub push: bool,
    /// HTTP/1.1 requests in flight per connection (`depth`, or 1 without pipelining).
    pub h1_depth: usize,
    /// An observer of the client's QUIC connections (`hxlab trace`; TCP streams carry theirs).
    pub tap: Option<crate::net::SharedTap>,
    url: usize,
    /// A request taken before connecting (so no connection is opened for nothing).
    reserved: Option<(Instant, u64)>,
}

impl ClientCtx {
    /// The next request to send (the reserved one first), given the current time.
    #[inline]
    pub fn next(&mut self, now: Instant) -> Next {
        if let Some((scheduled, ticket)) = self.reserved.take() {
            // Closed model: latency counts from the actual send, not from the reservation.
            let scheduled = if matches!(self.plan, Plan::Closed(_)) {
                now
            } else {
                scheduled
            };
            return Next::Go { scheduled, ticket };
        }
        self.plan.next(now)
    }

    /// A client for unit tests: `depth` in flight, 1 s timeouts, keep-alive, no push.
    #[cfg(test)]
    pub(crate) fn for_test(
        target: Rc<Target>,
        rec: SharedRecorder,
        plan: Plan,
        depth: usize,
    ) -> ClientCtx {
        ClientCtx {
            target,
            rec,
            plan,
            depth,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            no_keepalive: false,
            push: false,
            h1_depth: depth,
            tap: None,
            url: 0,
            reserved: None,
        }
    }

    /// Gives back a reservation that was not used.
    fn unreserve(&mut self) {
        if let Some((_, ticket)) = self.reserved.take() {
            self.plan.give_back(ticket);
        }
    }

    /// Index of the next URL (round-robin).
    #[inline]
    pub fn next_url(&mut self) -> usize {
        let i = self.url;
        self.url += 1;
        if self.url == self.target.requests.len() {
            self.url = 0;
        }
        i
    }
}

/// Which session runs on a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TcpSession {
    /// HTTP/1.1 (plain or TLS).
    H1,
    /// h2c prior knowledge.
    H2c,
    /// TLS, and ALPN must say h2.
    H2,
    /// TLS, whatever ALPN says (h2 or HTTP/1.1).
    Auto,
}

#[derive(Clone)]
enum Transport {
    Tcp {
        dialer: Dialer,
        session: TcpSession,
    },
    Quic {
        configs: tls::QuicConfigs,
        server_name: String,
        /// An observer of the connection (`hxlab trace`).
        tap: Option<crate::net::SharedTap>,
    },
}

/// What every worker needs, built once.
struct Setup {
    cfg: LoadConfig,
    target: Target,
    transport: Transport,
    start: Instant,
    measure_start: Instant,
    deadline: Option<Instant>,
    /// Width of the time series' intervals (None: no series).
    interval: Option<Duration>,
}

struct WorkerSpec {
    clients: u64,
    requests: u64,
    timetable: Option<crate::parts::Timetable>,
    progress: Arc<AtomicU64>,
}

struct WorkerOutput {
    /// What the worker's recorder counted (counts, maps, histograms; not times or CPU).
    part: RunResult,
    /// The worker's first connection-level failure.
    first_connect_error: Option<String>,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    finished: Instant,
    setup_error: Option<String>,
    /// The width the worker's series ended at (None: no series).
    interval: Option<Duration>,
}

impl WorkerOutput {
    /// A worker that could not start (nothing counted).
    fn setup_failed(why: String) -> WorkerOutput {
        WorkerOutput {
            part: RunResult::default(),
            first_connect_error: None,
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            finished: Instant::now(),
            setup_error: Some(why),
            interval: None,
        }
    }
}

fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn transport(
    cfg: &LoadConfig,
    target: &Target,
    tap: Option<&crate::net::SharedTap>,
) -> Result<Transport, LoadError> {
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
    let with_tls = |alpn: Vec<Vec<u8>>, session| -> Result<Transport, LoadError> {
        let refs: Vec<&[u8]> = alpn.iter().map(|v| v.as_slice()).collect();
        let config = tls::tcp_config(cfg, &refs)?;
        let name = tls::server_name(&target.host)?;
        Ok(Transport::Tcp {
            dialer: dialer.clone().with_tls(config, name),
            session,
        })
    };
    match (cfg.proto, target.https) {
        (Proto::H1, false) | (Proto::Auto, false) => Ok(Transport::Tcp {
            dialer,
            session: TcpSession::H1,
        }),
        (Proto::H1, true) => with_tls(offer(&[b"http/1.1"]), TcpSession::H1),
        (Proto::H2, false) | (Proto::H2c, false) => Ok(Transport::Tcp {
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
        (Proto::H3, true) => Ok(Transport::Quic {
            configs: tls::quic_config(cfg)?,
            server_name: target.host.clone(),
            tap: tap.cloned(),
        }),
    }
}

/// Runs a load test and returns its result. Blocking: it starts its own worker threads,
/// each with its own tokio runtime, and returns when they are done (from async code, call it
/// through `tokio::task::spawn_blocking`).
///
/// Errors are only for runs that cannot start (configuration, URLs, files); connection and
/// request failures are counted in the result. A run in which nothing worked has
/// `requests_done == 0` and the first failure in `error_samples`.
pub fn run(cfg: LoadConfig) -> Result<RunResult, LoadError> {
    run_inner(cfg, None)
}

/// Runs one client on one connection with `tap` installed on it (`hxlab trace`): the tap
/// sees the connection's transport facts and every byte the session sends and receives. The
/// run is `cfg` with one thread and one client, and it ends with its first connection (a
/// `--prime` connection comes before it, tapped too).
pub fn run_tapped(
    mut cfg: LoadConfig,
    tap: Box<dyn hxlab_wire::Tap>,
) -> Result<RunResult, LoadError> {
    cfg.threads = 1;
    cfg.clients = 1;
    cfg.progress = false;
    run_inner(cfg, Some(Arc::new(std::sync::Mutex::new(tap))))
}

fn run_inner(cfg: LoadConfig, tap: Option<crate::net::SharedTap>) -> Result<RunResult, LoadError> {
    cfg.validate()?;
    let target = Target::from_config(&cfg)?;
    let transport = transport(&cfg, &target, tap.as_ref())?;
    if cfg.prime {
        prime(&cfg, &target, &transport)?;
    }
    let run_id = crate::parts::run_id(&cfg);
    let started = crate::parts::wait_for_start(&cfg);
    let started_unix_s = started.unix_s;
    let start = Instant::now();
    let measure_start = start + cfg.warm_up;
    let deadline = cfg.duration.map(|d| measure_start + d);
    let setup = Arc::new(Setup {
        cfg: cfg.clone(),
        target,
        transport,
        start,
        measure_start,
        deadline,
        interval: (!cfg.interval.is_zero())
            .then(|| crate::series::width_for(cfg.interval, cfg.duration)),
    });

    let mut handles = Vec::new();
    let mut progress = Vec::new();
    for (w, share) in crate::parts::shares(&cfg).into_iter().enumerate() {
        let counter = Arc::new(AtomicU64::new(0));
        progress.push(counter.clone());
        let spec = WorkerSpec {
            clients: share.clients,
            requests: share.requests,
            timetable: share.timetable,
            progress: counter,
        };
        let s = setup.clone();
        let h = std::thread::Builder::new()
            .name(format!("hxlab-load-{w}"))
            .spawn(move || worker(s, spec))
            .map_err(|e| LoadError::Worker(e.to_string()))?;
        handles.push(h);
    }

    if cfg.progress {
        draw_progress(&cfg, &handles, &progress);
    }

    let mut result = RunResult {
        schema: hxlab_core::result::SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_s,
        config: run_config(&cfg),
        ..Default::default()
    };
    let mut last = measure_start;
    let mut setup_error = None;
    let mut outs = Vec::new();
    for h in handles {
        outs.push(
            h.join()
                .map_err(|_| LoadError::Worker("a worker thread panicked".into()))?,
        );
    }
    let width = same_width(&mut outs, setup.interval);
    for out in outs {
        if out.setup_error.is_some() && setup_error.is_none() {
            setup_error = out.setup_error.clone();
        }
        result.merge(&out.part);
        if result.error_samples.is_empty() {
            if let Some(e) = &out.first_connect_error {
                result.error_samples.push(e.clone());
            }
        }
        result.cpu_user_s += out.cpu_user_s;
        result.cpu_sys_s += out.cpu_sys_s;
        last = last.max(out.finished);
    }
    if let Some(e) = setup_error {
        return Err(LoadError::Worker(e));
    }
    let end = match deadline {
        Some(d) => last.min(d),
        None => last,
    };
    let measured = end.saturating_duration_since(measure_start);
    result.duration_s = measured.as_secs_f64();
    if let Some(w) = width {
        let w = hxlab_core::interval::finish_series(&mut result.intervals, w, measured);
        result.interval_s = w.as_secs_f64();
    }
    result.shards = vec![crate::parts::shard_info(&cfg, run_id, started)];
    Ok(result)
}

/// Brings every worker's series to the widest width any of them reached (a worker of a
/// run bounded by `-n` doubles its width when it runs past the cap), so they add up index
/// by index; returns that width (None: no series).
fn same_width(outs: &mut [WorkerOutput], asked: Option<Duration>) -> Option<Duration> {
    let width = outs
        .iter()
        .filter_map(|o| o.interval)
        .fold(asked?, Duration::max);
    for o in outs.iter_mut() {
        if let Some(mine) = o.interval.filter(|w| *w < width) {
            // Widths are the asked one times powers of two: the ratio is exact.
            let factor = width.as_nanos() / mine.as_nanos().max(1);
            hxlab_core::interval::widen(&mut o.part.intervals, factor as usize);
        }
        o.part.interval_s = width.as_secs_f64();
    }
    Some(width)
}

/// `--prime`: one request on one connection with the run's own TLS configuration (and so its
/// session store), before the run; nothing of it is counted. Fails only when the primer got
/// no answer at all.
fn prime(cfg: &LoadConfig, target: &Target, transport: &Transport) -> Result<(), LoadError> {
    let mut one = cfg.clone();
    one.requests = 1;
    one.clients = 1;
    one.threads = 1;
    one.duration = None;
    one.rate = None;
    one.warm_up = Duration::ZERO;
    one.progress = false;
    one.prime = false;
    let start = Instant::now();
    let setup = Arc::new(Setup {
        cfg: one,
        target: target.clone(),
        transport: transport.clone(),
        start,
        measure_start: start,
        deadline: None,
        interval: None,
    });
    let spec = WorkerSpec {
        clients: 1,
        requests: 1,
        timetable: None,
        progress: Arc::new(AtomicU64::new(0)),
    };
    let out = std::thread::Builder::new()
        .name("hxlab-load-prime".into())
        .spawn(move || worker(setup, spec))
        .map_err(|e| LoadError::Worker(e.to_string()))?
        .join()
        .map_err(|_| LoadError::Worker("the priming worker panicked".into()))?;
    if let Some(e) = out.setup_error {
        return Err(LoadError::Worker(e));
    }
    if out.part.requests_done == 0 {
        let why = out
            .first_connect_error
            .or_else(|| out.part.error_samples.first().cloned())
            .unwrap_or_else(|| "no response".into());
        return Err(LoadError::Worker(format!(
            "--prime: the priming request failed: {why}"
        )));
    }
    Ok(())
}

fn run_config(cfg: &LoadConfig) -> RunConfig {
    let mut extra = std::collections::BTreeMap::new();
    if let Some(m) = &cfg.method {
        extra.insert("method".into(), m.clone());
    }
    if cfg.body.is_some() {
        extra.insert(
            "body_bytes".into(),
            cfg.body.as_ref().map(|b| b.len()).unwrap_or(0).to_string(),
        );
    }
    if !cfg.warm_up.is_zero() {
        extra.insert("warm_up_s".into(), cfg.warm_up.as_secs_f64().to_string());
    }
    if cfg.tls_resume {
        extra.insert("tls_resume".into(), "true".into());
    }
    if cfg.push {
        extra.insert("push".into(), "true".into());
    }
    if cfg.zero_rtt {
        extra.insert("0rtt".into(), "true".into());
    }
    if cfg.prime {
        extra.insert("prime".into(), "true".into());
    }
    if cfg.tfo {
        extra.insert("tfo".into(), "true".into());
    }
    if let Some(a) = &cfg.alpn_list {
        extra.insert("alpn_list".into(), a.join(","));
    }
    if !cfg.headers.is_empty() {
        extra.insert(
            "headers".into(),
            cfg.headers
                .iter()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    RunConfig {
        urls: cfg.urls.clone(),
        protocol: cfg.proto.name().to_string(),
        clients: cfg.clients,
        max_concurrent_streams: cfg.max_concurrent_streams,
        threads: cfg.threads.min(cfg.clients),
        requests: if cfg.duration.is_some() {
            0
        } else {
            cfg.requests
        },
        duration_s: cfg.duration.map(|d| d.as_secs_f64()).unwrap_or(0.0),
        rate: cfg.rate,
        no_keepalive: cfg.no_keepalive,
        cc: cfg.cc,
        extra,
    }
}

fn draw_progress(
    cfg: &LoadConfig,
    handles: &[std::thread::JoinHandle<WorkerOutput>],
    counters: &[Arc<AtomicU64>],
) {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let by_time = cfg.duration.is_some();
    let total = match cfg.duration {
        Some(d) => (d + cfg.warm_up).as_millis() as u64,
        None => cfg.requests,
    };
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
    let template = if by_time {
        "{bar:40} {elapsed}/{duration} {msg}"
    } else {
        "{bar:40} {pos}/{len} requests {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let t0 = Instant::now();
    while handles.iter().any(|h| !h.is_finished()) {
        let done: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        if by_time {
            bar.set_position(t0.elapsed().as_millis() as u64);
            bar.set_message(format!("{done} requests"));
        } else {
            bar.set_position(done);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}

fn worker(setup: Arc<Setup>, spec: WorkerSpec) -> WorkerOutput {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => return WorkerOutput::setup_failed(format!("tokio runtime: {e}")),
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, worker_main(setup, spec))
}

/// The worker's helper tasks: the start of measuring after the warm-up (recorder on, CPU
/// baseline), and the progress counter.
fn side_tasks(setup: &Setup, spec: &WorkerSpec, rec: &SharedRecorder, cpu0: &Rc<Cell<(f64, f64)>>) {
    if !setup.cfg.warm_up.is_zero() {
        let (rec, cpu0, at) = (rec.clone(), cpu0.clone(), setup.measure_start);
        tokio::task::spawn_local(async move {
            tokio::time::sleep_until(at.into()).await;
            rec.borrow_mut().measuring = true;
            cpu0.set(thread_cpu());
        });
    }
    if setup.cfg.progress {
        let (rec, counter) = (rec.clone(), spec.progress.clone());
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let r = rec.borrow();
                counter.store(r.done + r.failed, Ordering::Relaxed);
            }
        });
    }
}

/// The worker's QUIC dialer (one UDP endpoint per worker); `None` on TCP.
fn quic_dialer(setup: &Setup) -> Result<Option<QuicDialer>, String> {
    let Transport::Quic {
        configs,
        server_name,
        tap: _,
    } = &setup.transport
    else {
        return Ok(None);
    };
    let addr = setup.target.addr;
    let bind: std::net::SocketAddr = if addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let endpoint =
        crate::h3::client_endpoint(bind).map_err(|e| format!("UDP socket for QUIC: {e}"))?;
    Ok(Some(QuicDialer {
        endpoint,
        configs: configs.clone(),
        addr,
        server_name: server_name.clone(),
        limit: setup.cfg.connect_timeout,
        zero_rtt: setup.cfg.zero_rtt,
    }))
}

/// Open model: the worker's clients' timetables (see [`crate::parts`]). Finite either way,
/// `-n` requests or every request due before the deadline, so each one can be accounted for
/// when the run ends.
fn open_ledger(setup: &Setup, spec: &WorkerSpec) -> Option<SharedLedger> {
    spec.timetable.as_ref().map(|t| {
        let limit = match (t.limit, setup.deadline) {
            (_, Some(d)) => Schedule::new(t.rate, 0, 1, u64::MAX)
                .first_index_due_at_or_after(d.saturating_duration_since(setup.start)),
            (Some(n), None) => n,
            (None, None) => 0,
        };
        let schedules = (0..spec.clients)
            .map(|k| Schedule::new(t.rate, t.first + k * t.step, t.stride, limit))
            .collect();
        Rc::new(RefCell::new(OpenLedger::new(schedules)))
    })
}

async fn worker_main(setup: Arc<Setup>, spec: WorkerSpec) -> WorkerOutput {
    let cfg = &setup.cfg;
    let warm = !cfg.warm_up.is_zero();
    let rec: SharedRecorder = Rc::new(RefCell::new(Recorder::new(setup.measure_start, !warm)));
    if let Some(w) = setup.interval {
        rec.borrow_mut().series = Some(crate::series::Series::new(setup.measure_start, w));
    }
    let cpu0 = Rc::new(Cell::new(thread_cpu()));
    side_tasks(&setup, &spec, &rec, &cpu0);
    let target = Rc::new(setup.target.clone());
    let quic = match quic_dialer(&setup) {
        Ok(q) => q,
        Err(e) => return WorkerOutput::setup_failed(e),
    };
    let budget = Rc::new(Cell::new(if cfg.duration.is_some() {
        u64::MAX
    } else {
        spec.requests
    }));
    let ledger = open_ledger(&setup, &spec);
    rec.borrow_mut().ledger = ledger.clone();
    let mut tasks = Vec::new();
    for k in 0..spec.clients {
        let plan = match &ledger {
            None => Plan::Closed(budget.clone()),
            Some(ledger) => Plan::Open {
                ledger: ledger.clone(),
                client: k as usize,
                start: setup.start,
            },
        };
        let ctx = ClientCtx {
            target: target.clone(),
            rec: rec.clone(),
            plan,
            depth: cfg.max_concurrent_streams as usize,
            timeout: cfg.timeout,
            connect_timeout: cfg.connect_timeout,
            no_keepalive: cfg.no_keepalive,
            push: cfg.push,
            h1_depth: if cfg.h1_pipeline {
                cfg.max_concurrent_streams as usize
            } else {
                1
            },
            tap: match &setup.transport {
                Transport::Quic { tap, .. } => tap.clone(),
                Transport::Tcp { .. } => None,
            },
            url: (k as usize) % target.requests.len(),
            reserved: None,
        };
        let transport = setup.transport.clone();
        let quic = quic.clone();
        tasks.push(tokio::task::spawn_local(client_loop(ctx, transport, quic)));
    }
    let all = futures::future::join_all(tasks);
    let finished_all = match setup.deadline {
        Some(d) => tokio::time::timeout_at(d.into(), all).await.ok(),
        None => Some(all.await),
    };
    if let (Some(results), Some(d), Some(_)) = (&finished_all, setup.deadline, &ledger) {
        // Open model, -D: the clients finished the timetable (its last request is due just
        // before the deadline) and got every answer; the run still lasts what was asked, as
        // it did when the timetable was endless.
        if results.iter().all(|r| matches!(r, Ok(0))) {
            tokio::time::sleep_until(d.into()).await;
        }
    }
    let finished = Instant::now();
    let (u1, s1) = thread_cpu();
    let (u0, s0) = cpu0.get();
    if ledger.is_none() && finished_all.is_none() {
        rec.borrow_mut().cut_at_deadline();
    }
    if ledger.is_some() {
        // The clients' tasks are dropped (deadline) or done: settle the books now.
        let end = setup.deadline.map_or(finished, |d| finished.min(d));
        rec.borrow_mut().finish_open(setup.start, end);
    } else if let Some(results) = finished_all {
        // Every client gave up or finished: what is left was never sent.
        let mut left: u64 = results.into_iter().map(|r| r.unwrap_or(0)).sum();
        if budget.get() != u64::MAX {
            left += budget.get();
        }
        rec.borrow_mut().requests_abandoned(left);
    }
    if let Some(q) = &quic {
        q.endpoint.close(quinn::VarInt::from_u32(0), b"");
    }
    // The recorder stays with this thread (its tasks still hold it); its figures travel.
    let rec = rec.borrow();
    let mut part = RunResult {
        schema: hxlab_core::result::SCHEMA_VERSION,
        ..Default::default()
    };
    rec.add_to(&mut part);
    WorkerOutput {
        part,
        first_connect_error: rec.first_connect_error.clone(),
        cpu_user_s: u1 - u0,
        cpu_sys_s: s1 - s0,
        finished,
        setup_error: None,
        interval: rec.series.as_ref().map(|s| s.width()),
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
async fn client_loop(mut ctx: ClientCtx, transport: Transport, quic: Option<QuicDialer>) -> u64 {
    let mut bufs = ClientBuffers {
        read: Vec::new(),
        h1: None,
        last_h2: Rc::new(Cell::new(None)),
    };
    let mut empty_sessions = 0u32;
    loop {
        if ctx.reserved.is_none() {
            match ctx.plan.next(Instant::now()) {
                Next::Done => return 0,
                Next::Go { scheduled, ticket } => ctx.reserved = Some((scheduled, ticket)),
                // A new connection per request opens when the request is due (its latency
                // includes the connection, as for a new visitor); a kept-alive one at once.
                Next::Wait(t) if ctx.no_keepalive => {
                    crate::precise::sleep_until(t).await;
                    continue;
                }
                Next::Wait(_) => {}
            }
        }
        let end = match &transport {
            Transport::Tcp { dialer, session } => {
                tcp_connection(&mut ctx, dialer, *session, &mut bufs).await
            }
            Transport::Quic { .. } => quic_connection(&mut ctx, quic.as_ref()).await,
        };
        let Some(end) = end else {
            // Connecting failed (counted): this client gives up.
            ctx.unreserve();
            return unsent(&ctx);
        };
        ctx.unreserve();
        if tapped(&transport) {
            // A traced run is one connection.
            return unsent(&ctx);
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
                    return unsent(&ctx);
                }
            }
        }
    }
}

/// Whether a tap watches this client's connections (`hxlab trace`).
fn tapped(transport: &Transport) -> bool {
    match transport {
        Transport::Tcp { dialer, .. } => dialer.tap.is_some(),
        Transport::Quic { tap, .. } => tap.is_some(),
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
    let mut qc = match dialer.dial().await {
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
    match qc.zero_rtt.take() {
        None => ctx.rec.borrow_mut().connected(
            None,
            Some(qc.handshake),
            resumed,
            "h3",
            Some("TLSv1.3"),
            Some(hxlab_core::cc::quic::of(&qc.conn)),
        ),
        Some(accepted) => {
            // 0-RTT: requests go out at once; whether the server took them is known later,
            // and the connection is counted then. Accepted 0-RTT is a resumption; rejected
            // 0-RTT may still have resumed the session (the handshake is complete by then,
            // unless the connection died).
            let rec = ctx.rec.clone();
            let t0 = Instant::now() - qc.handshake;
            let conn = qc.conn.clone();
            let check = qc.cert_check.clone();
            tokio::task::spawn_local(async move {
                let ok = accepted.await;
                let resumed =
                    ok || (conn.close_reason().is_none() && check.is_some_and(|c| !c.verified()));
                rec.borrow_mut().early_data("h3", ok);
                rec.borrow_mut().connected(
                    None,
                    Some(t0.elapsed()),
                    resumed,
                    "h3",
                    Some("TLSv1.3"),
                    Some(hxlab_core::cc::quic::of(&conn)),
                );
            });
        }
    }
    Some(crate::h3::session(ctx, qc.conn).await)
}

/// Tells the tap what a QUIC connection's handshake established.
fn tell_quic_facts(
    tap: &crate::net::SharedTap,
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

/// Open-model requests this client will never send (0 in the closed model, whose budget
/// is counted by the worker).
fn unsent(ctx: &ClientCtx) -> u64 {
    match &ctx.plan {
        Plan::Open { ledger, client, .. } => match ledger.borrow().schedules.get(*client) {
            Some(schedule) => match schedule.peek() {
                None => 0,
                Some((next, _)) => schedule.total() - schedule.taken_before(next),
            },
            None => 0,
        },
        Plan::Closed(_) => 0,
    }
}
