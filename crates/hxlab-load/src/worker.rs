//! Workers: `-t` OS threads, each a current-thread tokio runtime running its share of the
//! clients (each a [`crate::client::ClientCtx`] in [`crate::connect::client_loop`]); and
//! [`run`], which checks the configuration, starts the workers and merges what they
//! recorded. The progress bar is [`crate::progress`], the result's configuration
//! [`crate::run_config`].

use crate::client::{ClientCtx, ConnectionTimeouts, HeaderTables};
use crate::connect::{client_loop, connector, Connector};
use crate::h3::QuicDialer;
use crate::plan::{OpenLedger, Pace, Plan, SharedLedger};
use crate::progress::draw_progress;
use crate::recorder::{Recorder, SharedRecorder};
use crate::run_config::run_config;
use crate::scheduler::Schedule;
use crate::target::Target;
use crate::{LoadConfig, LoadError};
use hxlab_core::rusage::thread_cpu;
use hxlab_core::RunResult;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every worker needs, built once.
struct Setup {
    cfg: LoadConfig,
    target: Target,
    connector: Connector,
    start: Instant,
    measure_start: Instant,
    deadline: Option<Instant>,
    /// Width of the time series' intervals (None: no series).
    interval: Option<Duration>,
    /// Where workers publish their figures as they go (`--metrics-listen`).
    live: Option<Arc<crate::live::Live>>,
    /// `--log-file`, opened for appending (each worker writes through its own handle).
    log_file: Option<std::fs::File>,
}

struct WorkerSpec {
    /// The worker's number, from 0.
    index: usize,
    clients: u64,
    requests: u64,
    timetable: Option<crate::shard::Timetable>,
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

/// Runs a load test and returns its result. Blocking: it starts its own worker threads,
/// each with its own tokio runtime, and returns when they are done (from async code, call it
/// through `tokio::task::spawn_blocking`).
///
/// Errors are only for runs that cannot start (configuration, URLs, files); connection and
/// request failures are counted in the result. A run in which nothing worked has
/// `requests_done == 0` and the first failure in `error_samples`.
pub fn run(cfg: LoadConfig) -> Result<RunResult, LoadError> {
    run_inner(cfg, None, None)
}

/// [`run`], with the figures published to `live` as the run goes (four times a second per
/// worker) and its totals once it has ended.
pub fn run_live(cfg: LoadConfig, live: Arc<crate::live::Live>) -> Result<RunResult, LoadError> {
    let result = run_inner(cfg, None, Some(live.clone()))?;
    live.finish(&result);
    Ok(result)
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
    run_inner(cfg, Some(Arc::new(std::sync::Mutex::new(tap))), None)
}

fn run_inner(
    cfg: LoadConfig,
    tap: Option<crate::net::SharedTap>,
    live: Option<Arc<crate::live::Live>>,
) -> Result<RunResult, LoadError> {
    cfg.validate()?;
    let target = Target::from_config(&cfg)?;
    let connector = connector(&cfg, &target, tap.as_ref())?;
    if cfg.prime {
        prime(&cfg, &target, &connector)?;
    }
    let log_file = open_log(&cfg)?;
    let run_id = crate::shard::run_id(&cfg);
    let started = crate::shard::wait_for_start(&cfg);
    let started_unix_s = started.unix_s;
    let start = Instant::now();
    let measure_start = start + cfg.warm_up;
    let deadline = cfg.duration.map(|d| measure_start + d);
    let setup = Arc::new(Setup {
        cfg: cfg.clone(),
        target,
        connector,
        start,
        measure_start,
        deadline,
        interval: (!cfg.interval.is_zero())
            .then(|| crate::series::width_for(cfg.interval, cfg.duration)),
        live,
        log_file,
    });

    let mut handles = Vec::new();
    let mut progress = Vec::new();
    for (w, share) in crate::shard::shares(&cfg).into_iter().enumerate() {
        let counter = Arc::new(AtomicU64::new(0));
        progress.push(counter.clone());
        let spec = WorkerSpec {
            index: w,
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
        environment: Some(hxlab_core::env::Environment::here()),
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
    result.shards = vec![crate::shard::shard_info(&cfg, run_id, started)];
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
fn prime(cfg: &LoadConfig, target: &Target, connector: &Connector) -> Result<(), LoadError> {
    let mut one = cfg.clone();
    one.requests = 1;
    one.clients = 1;
    one.threads = 1;
    one.duration = None;
    one.rate = None;
    one.warm_up = Duration::ZERO;
    one.progress = false;
    one.prime = false;
    one.verbose = false;
    let start = Instant::now();
    let setup = Arc::new(Setup {
        cfg: one,
        target: target.clone(),
        connector: connector.clone(),
        start,
        measure_start: start,
        deadline: None,
        interval: None,
        live: None,
        log_file: None,
    });
    let spec = WorkerSpec {
        index: 0,
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
    if let Some(live) = &setup.live {
        let (rec, live, index) = (rec.clone(), live.clone(), spec.index);
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(crate::live::PUBLISH_EVERY).await;
                let figures = rec.borrow().live();
                live.publish(index, figures);
            }
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

/// The worker's QUIC dialer (one UDP socket and driver per worker); `None` on TCP.
fn quic_dialer(setup: &Setup, index: usize) -> Result<Option<QuicDialer>, String> {
    let Connector::Quic {
        configs,
        server_name,
        tap: _,
    } = &setup.connector
    else {
        return Ok(None);
    };
    let addr = setup.target.addr;
    let bind: std::net::SocketAddr = if addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let driver =
        crate::h3::client_endpoint(bind).map_err(|e| format!("UDP socket for QUIC: {e}"))?;
    Ok(Some(QuicDialer {
        driver,
        configs: configs.clone(),
        addr,
        server_name: server_name.clone(),
        limit: setup.cfg.connect_timeout,
        zero_rtt: setup.cfg.zero_rtt,
        worker: index,
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

/// Client `k` of a worker: what it sends (`plan`, `target`), where it counts (`rec`), its
/// limits.
fn client_ctx(
    setup: &Setup,
    k: u64,
    plan: Plan,
    target: &Rc<Target>,
    rec: &SharedRecorder,
) -> ClientCtx {
    let cfg = &setup.cfg;
    // h2load: with a request body, HTTP/1.1 sends one request at a time.
    let pipelined = cfg.h1_pipeline && cfg.body.is_none();
    ClientCtx {
        index: k as u32,
        target: target.clone(),
        rec: rec.clone(),
        plan,
        depth: cfg.max_concurrent_streams as usize,
        timeout: cfg.timeout,
        connect_timeout: cfg.connect_timeout,
        no_keepalive: cfg.no_keepalive,
        push: cfg.push,
        h1_depth: if pipelined {
            cfg.max_concurrent_streams as usize
        } else {
            1
        },
        tap: match &setup.connector {
            Connector::Quic { tap, .. } => tap.clone(),
            Connector::Tcp { .. } => None,
        },
        header_tables: HeaderTables {
            decoder: cfg.header_table_size,
            encoder: cfg.encoder_header_table_size,
        },
        connection_timeouts: ConnectionTimeouts {
            active: cfg.connection_active_timeout,
            inactivity: cfg.connection_inactivity_timeout,
        },
        retired: false,
        quic_dials: 0,
        url: (k as usize) % target.requests.len(),
        reserved: None,
    }
}

/// A worker's recorder: measuring from the start unless there is a warm-up, with its time
/// series, its clients' spans and its per-request output (`--log-file`, `-v`).
fn recorder(setup: &Setup, spec: &WorkerSpec) -> SharedRecorder {
    let cfg = &setup.cfg;
    let mut rec = Recorder::new(setup.measure_start, cfg.warm_up.is_zero());
    if let Some(w) = setup.interval {
        rec.series = Some(crate::series::Series::new(setup.measure_start, w));
    }
    rec.clients = crate::per_client::ClientSpans::new(spec.clients as usize);
    let file = setup.log_file.as_ref().and_then(|f| f.try_clone().ok());
    rec.log = crate::request_log::RequestLog::new(file, cfg.verbose, spec.index);
    Rc::new(RefCell::new(rec))
}

/// `--log-file`: the file, created if missing and appended to (as h2load opens it).
fn open_log(cfg: &LoadConfig) -> Result<Option<std::fs::File>, LoadError> {
    let Some(path) = &cfg.log_file else {
        return Ok(None);
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Some)
        .map_err(|source| LoadError::File {
            path: format!("--log-file {}", path.display()),
            source,
        })
}

async fn worker_main(setup: Arc<Setup>, spec: WorkerSpec) -> WorkerOutput {
    let cfg = &setup.cfg;
    let rec = recorder(&setup, &spec);
    let cpu0 = Rc::new(Cell::new(thread_cpu()));
    side_tasks(&setup, &spec, &rec, &cpu0);
    let target = Rc::new(setup.target.clone());
    let quic = match quic_dialer(&setup, spec.index) {
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
            None => match cfg.rps {
                Some(rps) => Plan::Paced(budget.clone(), Pace::new(rps)),
                None => Plan::Closed(budget.clone()),
            },
            Some(ledger) => Plan::Open {
                ledger: ledger.clone(),
                client: k as usize,
                start: setup.start,
            },
        };
        let ctx = client_ctx(&setup, k, plan, &target, &rec);
        let connector = setup.connector.clone();
        let quic = quic.clone();
        tasks.push(tokio::task::spawn_local(client_loop(ctx, connector, quic)));
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
    {
        let mut r = rec.borrow_mut();
        r.clients
            .finish(setup.deadline.map_or(finished, |d| finished.min(d)));
        if let Some(log) = &mut r.log {
            log.flush();
        }
    }
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
        q.driver.close();
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
