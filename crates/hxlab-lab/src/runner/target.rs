//! Where a cell's requests go and how its server's cost is read: the built-in `hxlab serve`
//! (its `/stats`), a command origin the lab started (its process tree in /proc), or a url
//! origin the lab does not run (no server cost: unavailable, not zero).

use super::stats::{counts_between, server_cost, server_scheduling, server_stats};
use super::{io_err, Runner, RunnerError};
use crate::command::{fill_www, find_program, CommandServer, LabCert, StartArgs};
use crate::experiment::origins::{default_path, resource_url, CommandOrigin};
use crate::experiment::{Cell, Experiment, OriginKind, Protocol};
use hxlab_core::sched::Scheduling;
use hxlab_report::{Record, ServerCost, Workload};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The server a cell's requests go to.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// Base URL for the cell's protocol: `scheme://host:port` and an optional path prefix.
    pub base: String,
    /// None: `hxlab serve`'s own URLs (`/bytes/N?delay=MS`, `/page`); otherwise a path
    /// template per workload (`{{size}}`, `{{resources}}`).
    pub paths: Option<BTreeMap<Workload, String>>,
    /// CA certificate to trust.
    pub cacert: Option<PathBuf>,
    /// Accept any certificate.
    pub insecure: bool,
    /// Reached on this machine's loopback (a link moves it to the link's host address,
    /// which its certificate does not name).
    pub local: bool,
    /// How its cost is read.
    pub meter: Meter,
    /// SPKI hash of its certificate for a browser (None: trusted as the system trusts it).
    pub spki: Option<String>,
}

impl Target {
    /// The URL of one resource of a cell (origins with path templates).
    pub fn templated(&self, workload: Workload, size: u64, resources: u64) -> Option<String> {
        let t = self.paths.as_ref()?.get(&workload)?;
        Some(resource_url(&self.base, t, size, resources))
    }
}

/// How a server's cost is read before and after a cell.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Meter {
    /// `GET /stats` on hxlab serve's plain port: CPU, requests and controllers per protocol.
    Stats(SocketAddr),
    /// CPU of the process tree led by this PID; requests are the client's count.
    Tree(u32),
    /// Nothing can be read (a url origin).
    Unavailable,
}

/// One reading of a [`Meter`].
#[derive(Clone, Debug)]
pub(crate) enum Reading {
    Stats(Option<Box<hxlab_contract::StatsSnapshot>>),
    Cpu(Option<f64>),
    Nothing,
}

impl Meter {
    pub fn read(&self) -> Reading {
        match self {
            Meter::Stats(a) => Reading::Stats(server_stats(*a).map(Box::new)),
            Meter::Tree(pid) => Reading::Cpu(crate::command::tree_cpu_s(*pid)),
            Meter::Unavailable => Reading::Nothing,
        }
    }
}

/// What two readings of a cell's server say about it, shared by its repetitions.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerReadBack {
    /// Its cost per repetition.
    pub cost: Option<ServerCost>,
    /// Its connections of the cell's protocol per congestion controller.
    pub cc: BTreeMap<String, u64>,
    /// Its connections of the cell's protocol by their encoder's header table size.
    pub encoder_tables: BTreeMap<String, u64>,
    /// Its scheduler, its connections' marks and the priorities it understood (hxlab's
    /// origin only).
    pub scheduling: Option<Scheduling>,
}

impl ServerReadBack {
    /// Puts it into a record of the cell.
    pub fn fill(&self, record: &mut Record) {
        record.server = self.cost.clone();
        record.server_cc = self.cc.clone();
        record.server_encoder_tables = self.encoder_tables.clone();
        record.scheduling = self.scheduling.clone();
    }
}

/// The server's cost, controllers and send path between two readings, shared by `n`
/// repetitions. For a process tree, `requests` is left at 0 until [`client_requests`]
/// fills it.
pub(crate) fn read_back(
    before: &Reading,
    after: &Reading,
    proto: Protocol,
    n: usize,
) -> ServerReadBack {
    match (before, after) {
        (Reading::Stats(b), Reading::Stats(a)) => {
            let (b, a) = (b.as_deref(), a.as_deref());
            ServerReadBack {
                cost: server_cost(b, a, proto, n),
                cc: counts_between(b, a, proto, |p| &p.cc),
                encoder_tables: counts_between(b, a, proto, |p| &p.encoder_tables),
                scheduling: server_scheduling(b, a, proto),
            }
        }
        (Reading::Cpu(Some(b)), Reading::Cpu(Some(a))) => ServerReadBack {
            cost: Some(ServerCost {
                cpu_s: (a - b).max(0.0) / n.max(1) as f64,
                requests: 0,
            }),
            ..ServerReadBack::default()
        },
        _ => ServerReadBack::default(),
    }
}

/// A process tree's cost counts the requests the client completed, warm-up included (the
/// server keeps no count the lab can read, and its CPU is read around the whole run).
pub(crate) fn client_requests(meter: &Meter, record: &mut Record) {
    if let (Meter::Tree(_), Some(s), Some(r)) = (meter, record.server.as_mut(), &record.result) {
        s.requests = r.requests_done + r.warm_up_requests_done;
    }
}

/// Why a cell cannot run on its origin.
#[derive(Clone, Debug)]
pub(crate) enum NoTarget {
    /// Not run, with the reason (the origin does not speak the protocol, is not installed).
    Skip(String),
    /// Failed (the origin did not start).
    Fail(String),
}

impl NoTarget {
    /// Marks `record` skipped or failed with the reason.
    pub fn mark(self, record: &mut Record) {
        match self {
            NoTarget::Skip(why) => record.skipped = Some(why),
            NoTarget::Fail(why) => record.error = Some(why),
        }
    }
}

impl Runner {
    /// The target of `cell`: its origin started if the lab runs it.
    pub(super) fn target(&mut self, exp: &Experiment, cell: &Cell) -> Result<Target, NoTarget> {
        let cfg = &cell.config;
        let def = exp
            .origin(&cfg.origin)
            .ok_or_else(|| NoTarget::Fail(format!("origin {:?} is not defined", cfg.origin)))?;
        if !def.protocols.contains(&cfg.protocol) {
            return Err(NoTarget::Skip(format!(
                "origin {} does not speak {} (its protocols: {})",
                def.name,
                cfg.protocol.name(),
                def.protocols
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        match &def.kind {
            OriginKind::Builtin => {
                self.ensure_server(cfg.origin_settings())
                    .map_err(|e| NoTarget::Fail(e.to_string()))?;
                let s = self
                    .server
                    .as_ref()
                    .ok_or_else(|| NoTarget::Fail("no server".into()))?;
                let port = match cfg.protocol {
                    Protocol::H1 | Protocol::H2c => Some(s.ready.plain.port()),
                    Protocol::H1Tls | Protocol::H2 => Some(s.ready.tls.port()),
                    Protocol::H3 => s.ready.h3.map(|a| a.port()),
                };
                let port = port.ok_or_else(|| {
                    NoTarget::Fail(
                        "the server has no HTTP/3 listener (ready file: h3 = null)".into(),
                    )
                })?;
                let scheme = if cfg.protocol.tls() { "https" } else { "http" };
                Ok(Target {
                    base: format!("{scheme}://127.0.0.1:{port}"),
                    paths: None,
                    cacert: Some(s.cert.clone()),
                    insecure: false,
                    local: true,
                    meter: Meter::Stats(s.stats_addr()),
                    spki: Some(s.ready.spki_sha256.clone()),
                })
            }
            OriginKind::Command(_) => {
                let server = self.command_server(exp, &def.name)?;
                let base = server.base_url(cfg.protocol).ok_or_else(|| {
                    NoTarget::Fail(format!(
                        "origin {} has no port for {}",
                        def.name,
                        cfg.protocol.name()
                    ))
                })?;
                Ok(Target {
                    base,
                    paths: Some(
                        [Workload::Resources, Workload::Throughput, Workload::Browser]
                            .into_iter()
                            .map(|w| (w, default_path(w).to_string()))
                            .collect(),
                    ),
                    cacert: Some(server.cert.cert.clone()),
                    insecure: false,
                    local: true,
                    meter: Meter::Tree(server.pid()),
                    spki: Some(server.cert.spki_sha256.clone()),
                })
            }
            OriginKind::Url(u) => {
                let base = u.urls.get(&cfg.protocol).cloned().ok_or_else(|| {
                    NoTarget::Skip(format!(
                        "origin {} has no URL for {}",
                        def.name,
                        cfg.protocol.name()
                    ))
                })?;
                let local = hxlab_child::origin::is_loopback_url(&base);
                Ok(Target {
                    base,
                    paths: Some(u.paths.clone()),
                    cacert: u.cacert.clone(),
                    insecure: u.insecure,
                    local,
                    meter: Meter::Unavailable,
                    spki: None,
                })
            }
        }
    }

    /// The running command origin `name`, started (with its document root filled) on first
    /// use and restarted if it died; a program that is not installed, or a start that
    /// failed, is not tried again.
    fn command_server(&mut self, exp: &Experiment, name: &str) -> Result<&CommandServer, NoTarget> {
        let alive = match self.commands.get_mut(name) {
            Some(Ok(s)) => s.is_running(),
            Some(Err(e)) => return Err(e.clone()),
            None => false,
        };
        if !alive {
            let started = self.start_command(exp, name);
            self.commands.insert(name.to_string(), started);
        }
        match self.commands.get(name) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => Err(NoTarget::Fail(format!("origin {name} did not start"))),
        }
    }

    /// Starts command origin `name`, or says why not: not installed here (skipped), or
    /// it did not start (failed).
    fn start_command(&mut self, exp: &Experiment, name: &str) -> Result<CommandServer, NoTarget> {
        let def = exp
            .origin(name)
            .ok_or_else(|| NoTarget::Fail(format!("origin {name:?} is not defined")))?;
        let OriginKind::Command(c) = &def.kind else {
            return Err(NoTarget::Fail(format!(
                "origin {name} is not a command origin"
            )));
        };
        if find_program(&c.command[0]).is_none() {
            return Err(NoTarget::Skip(format!(
                "origin {name} is not installed here (its program {:?} was not found)",
                c.command[0]
            )));
        }
        self.launch(exp, &def, c)
            .map_err(|e| NoTarget::Fail(e.to_string()))
    }

    /// Fills the document root, renders the templates and starts the server.
    fn launch(
        &mut self,
        exp: &Experiment,
        def: &crate::experiment::OriginDef,
        c: &CommandOrigin,
    ) -> Result<CommandServer, RunnerError> {
        let name = def.name.as_str();
        let root = self.opts.out_dir.join(".origins");
        let cert = match &self.cert {
            Some(c) => c.clone(),
            None => {
                let made = LabCert::make(&root.join("tls")).map_err(RunnerError::Server)?;
                self.cert = Some(made.clone());
                made
            }
        };
        let www = root.join("www");
        let mut sizes: Vec<u64> = Vec::new();
        let mut pages: Vec<(u64, u64)> = Vec::new();
        for cell in exp.cells.iter().filter(|c| c.config.origin == name) {
            if !sizes.contains(&cell.config.size) {
                sizes.push(cell.config.size);
            }
            let page = (cell.config.resources, cell.config.size);
            if exp.workload == Workload::Browser && !pages.contains(&page) {
                pages.push(page);
            }
        }
        fill_www(&www, &sizes, &pages).map_err(RunnerError::Server)?;
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        CommandServer::start(
            def,
            c,
            &StartArgs {
                dir: &dir,
                www: &www,
                bind: self.bind,
                cert: &cert,
            },
        )
        .map_err(RunnerError::Server)
    }
}
