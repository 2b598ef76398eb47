//! Network cells: every repetition of consecutive cells with the same link settings runs in
//! one `hxlab link` (its typed `LinkConfig` handed over as `--config`), whose command is
//! `hxlab load --jobs`: the runner hands it one typed [`LoadJob`] at a time and reads the
//! server's counters between cells, so each cell is still measured on its own while the link
//! is set up and torn down once. Runner → link → load generator: the fewest hops the
//! namespace allows (the link holds it and relays its packets; the load must run inside).

use super::plan::{plan, LoadPlan};
use super::record::{fill_record, new_records};
use super::target::{client_requests, read_back, Meter, NoTarget, Reading};
use super::{Runner, LINK_GRACE};
use crate::experiment::{Cell, Experiment};
use hxlab_child::child::{signal_group, spawn_group};
use hxlab_contract::{JobDone, LoadJob};
use hxlab_link::LinkConfig;
use hxlab_report::Record;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One `hxlab link … -- hxlab load --jobs` and the pipes to its load generator.
struct LinkLoad {
    child: Child,
    jobs: Option<ChildStdin>,
    replies: mpsc::Receiver<String>,
    stderr: JoinHandle<String>,
    /// The link's exit status, once it has exited (None inside: killed by a signal).
    exited: Option<Option<i32>>,
}

impl LinkLoad {
    /// Starts `hxlab link --config LINK -- hxlab load --jobs`, the link written to `file`,
    /// with `expose`d ports (servers of this machine's loopback that cells load from).
    fn start(
        bin: &Path,
        link: &LinkConfig,
        file: &Path,
        expose: &[u16],
    ) -> Result<LinkLoad, String> {
        let json = link.to_json().map_err(|e| e.to_string())?;
        std::fs::write(file, json).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut cmd = Command::new(bin);
        cmd.arg("link").arg("--config").arg(file);
        if !expose.is_empty() {
            let ports: Vec<String> = expose.iter().map(u16::to_string).collect();
            cmd.arg("--expose").arg(ports.join(","));
        }
        cmd.arg("--").arg(bin).args(["load", "--jobs"]);
        let (mut child, stderr) = spawn_group(cmd, true)?;
        let jobs = child.stdin.take();
        let out = child.stdout.take();
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(out) = out else { return };
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(LinkLoad {
            child,
            jobs,
            replies,
            stderr,
            exited: None,
        })
    }

    /// Runs one job; None when the load generator (or the link) is gone or `deadline` passed.
    fn run(&mut self, job: &LoadJob, deadline: Instant) -> Option<JobDone> {
        let line = serde_json::to_string(job).ok()?;
        let jobs = self.jobs.as_mut()?;
        if writeln!(jobs, "{line}").and_then(|_| jobs.flush()).is_err() {
            return None;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let reply = self.replies.recv_timeout(wait).ok()?;
        serde_json::from_str(&reply).ok()
    }

    /// Ends the load generator (its input closes) and waits for the link to go. Once every
    /// repetition is done nothing more is measured, so a link that lingers (it drains
    /// packets still in flight, e.g. QUIC retransmissions towards clients that have gone) is
    /// asked to stop after a grace period, then killed; its TUN devices and namespace go with
    /// its file descriptors. Returns the link's exit status and the end of its stderr.
    fn finish(mut self, all_done: bool, deadline: Instant) -> (Option<i32>, String) {
        self.jobs = None;
        let done_at = Instant::now();
        let mut termed = false;
        let code = loop {
            if let Some(c) = self.exited {
                break c;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                break st.code();
            }
            if all_done && !termed && done_at.elapsed() > LINK_GRACE {
                // SAFETY: kill has no memory-safety preconditions; the pid is our child.
                unsafe {
                    libc::kill(self.child.id() as i32, libc::SIGTERM);
                }
                termed = true;
            }
            let past_grace = all_done && done_at.elapsed() > 2 * LINK_GRACE;
            if Instant::now() > deadline || past_grace {
                signal_group(self.child.id(), libc::SIGKILL);
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        // Nothing of the group may outlive it.
        signal_group(self.child.id(), libc::SIGKILL);
        (code, self.stderr.join().unwrap_or_default())
    }

    /// Notes the link's exit if it has exited.
    fn check_exit(&mut self) {
        if self.exited.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.exited = Some(st.code());
            }
        }
    }
}

/// Marks every record not yet decided as skipped or failed with `why`.
fn fail_all(out: &mut [Vec<Record>], skipped: bool, why: &str) {
    for r in out.iter_mut().flatten() {
        if r.result.is_none() && r.error.is_none() && r.skipped.is_none() {
            if skipped {
                r.skipped = Some(why.to_string());
            } else {
                r.error = Some(why.to_string());
            }
        }
    }
}

/// Where repetition `rep` of the group's cell `ci` writes its RunResult.
fn result_path(dir: &Path, ci: usize, rep: u32) -> PathBuf {
    dir.join(format!(".link-{ci}-{rep}.json"))
}

impl Runner {
    /// Every repetition of consecutive network cells that share the same link settings, in
    /// one `hxlab link`: setting a link up and tearing it down costs far more than a
    /// repetition. Between cells the runner reads the server's counters, so the server's
    /// CPU is still attributed per cell.
    pub(super) fn run_link_group(
        &mut self,
        exp: &Experiment,
        group: &[(&Cell, Vec<u32>)],
        dir: &Path,
    ) -> Vec<Record> {
        let mut out: Vec<Vec<Record>> = group
            .iter()
            .map(|(c, reps)| new_records(exp, c, reps))
            .collect();
        if let Some(Err(why)) = &self.link {
            let why = format!("link emulation is not available here ({why})");
            fail_all(&mut out, true, &why);
            return out.into_iter().flatten().collect();
        }
        // The runner groups only cells of one origin with the same server controller.
        let mut meter = None;
        // Loopback origins are reached inside at the link's host address: their ports are
        // exposed there (a server bound to 127.0.0.1 only is reached too).
        let mut expose = Vec::new();
        let plans: Vec<Option<LoadPlan>> = group
            .iter()
            .zip(out.iter_mut())
            .map(|((c, _), records)| {
                let planned = self.target(exp, c).and_then(|t| {
                    meter.get_or_insert(t.meter);
                    if t.local {
                        if let Some((_, _, port)) = hxlab_child::origin::host_port(&t.base) {
                            if !expose.contains(&port) {
                                expose.push(port);
                            }
                        }
                    }
                    plan(exp, &c.config, &t).map_err(NoTarget::Fail)
                });
                match planned {
                    Ok(p) => Some(p),
                    Err(no) => {
                        records.iter_mut().for_each(|r| no.clone().mark(r));
                        None
                    }
                }
            })
            .collect();
        let meter = meter.unwrap_or(Meter::Unavailable);
        let Some(first) = plans.iter().position(Option::is_some) else {
            return out.into_iter().flatten().collect();
        };
        let mut link = match group[first].0.config.link_config() {
            Ok(Some(l)) => l,
            Ok(None) => {
                fail_all(&mut out, false, "a network cell without a network");
                return out.into_iter().flatten().collect();
            }
            Err(e) => {
                fail_all(&mut out, false, &e);
                return out.into_iter().flatten().collect();
            }
        };
        link.seed = match exp.seed {
            Some(s) => s + u64::from(group[first].1[0]),
            None => hxlab_link::config::random_seed(),
        };
        let link_file = dir.join(".link.json");
        let group_start = Instant::now();
        let mut load = match LinkLoad::start(&self.opts.hxlab_bin, &link, &link_file, &expose) {
            Ok(a) => a,
            Err(e) => {
                fail_all(&mut out, false, &e);
                return out.into_iter().flatten().collect();
            }
        };
        let total_reps: usize = (0..group.len())
            .filter(|&ci| plans[ci].is_some())
            .map(|ci| group[ci].1.len())
            .sum();
        let deadline = Instant::now() + exp.timeout * total_reps as u32 + Duration::from_secs(30);
        let run = GroupRun {
            exp,
            group,
            plans: &plans,
            dir,
            meter,
            deadline,
        };
        let (walls, all_done) = run.cells(&mut load, &mut out);
        let (code, stderr) = load.finish(all_done, deadline);
        for (ci, records) in out.iter_mut().enumerate() {
            let Some(p) = &plans[ci] else { continue };
            for (r, &rep) in records.iter_mut().zip(&group[ci].1) {
                r.expected_body_bytes = p.expected_body_bytes;
                let json = result_path(dir, ci, rep);
                if r.error.is_none() {
                    fill_record(r, &json, &stderr, Some(code));
                    client_requests(&meter, r);
                }
                let _ = std::fs::remove_file(&json);
            }
        }
        let _ = std::fs::remove_file(&link_file);
        self.link_extra_s += (group_start.elapsed().as_secs_f64() - walls).max(0.0);
        out.into_iter().flatten().collect()
    }
}

/// One group's repetitions as they are handed to the load generator.
struct GroupRun<'a> {
    exp: &'a Experiment,
    group: &'a [(&'a Cell, Vec<u32>)],
    plans: &'a [Option<LoadPlan>],
    dir: &'a Path,
    meter: Meter,
    deadline: Instant,
}

impl GroupRun<'_> {
    /// Runs the cells in order, each cell's repetitions back to back, with a `/stats`
    /// reading between cells. Returns the cells' summed wall time and whether every
    /// repetition ran to an answer.
    fn cells(&self, load: &mut LinkLoad, out: &mut [Vec<Record>]) -> (f64, bool) {
        let mut before = self.meter.read();
        let mut walls = 0.0;
        for (ci, records) in out.iter_mut().enumerate() {
            let Some(plan) = &self.plans[ci] else {
                continue;
            };
            let t = Instant::now();
            let finished = self.cell(load, ci, plan, records);
            let after = self.meter.read();
            let wall = t.elapsed().as_secs_f64();
            walls += wall;
            self.attribute(ci, records, wall, &before, &after);
            before = after;
            if !finished {
                return (walls, false);
            }
        }
        (walls, true)
    }

    /// Runs one cell's repetitions; false when the load generator stopped answering.
    fn cell(
        &self,
        load: &mut LinkLoad,
        ci: usize,
        plan: &LoadPlan,
        records: &mut [Record],
    ) -> bool {
        for (r, &rep) in records.iter_mut().zip(&self.group[ci].1) {
            let result = result_path(self.dir, ci, rep);
            let _ = std::fs::remove_file(&result);
            let job = LoadJob {
                config: plan.config.clone(),
                result,
                limit_ms: self.exp.timeout.as_millis() as u64,
            };
            match load.run(&job, self.deadline) {
                Some(done) => {
                    r.exit_code = done.exit;
                    // Stopped at its limit, or could not start: said here, not guessed later.
                    r.error = done.error.map(|e| format!("no result (hxlab load {e})"));
                }
                None => {
                    load.check_exit();
                    return false;
                }
            }
        }
        true
    }

    /// The cell's wall time and what its server read back, shared by its repetitions.
    fn attribute(
        &self,
        ci: usize,
        records: &mut [Record],
        wall: f64,
        before: &Reading,
        after: &Reading,
    ) {
        let proto = self.group[ci].0.config.protocol;
        let n = self.group[ci].1.len();
        let seen = read_back(before, after, proto, n);
        for r in records.iter_mut() {
            r.wall_s = wall / n as f64;
            seen.fill(r);
        }
    }
}
