//! Statistics over repetitions and the tables, comparisons and warnings built from them.
//! Everything a format shows comes from [`Report`], so the formats cannot disagree.

pub use crate::comparisons::mann_whitney_p;
use crate::comparisons::Comparison;
use crate::model::{ExperimentMeta, Metric, Record};
use hxlab_core::stats;
use std::collections::BTreeMap;

/// Confidence level of every interval in the report.
pub const CONFIDENCE: f64 = 0.95;
/// Bootstrap resamples per interval (deterministic generator, so reports re-render identically).
pub const RESAMPLES: usize = 2000;
/// A cell whose 95 % interval is wider than this fraction of its median gets a warning.
pub const WIDE_SPREAD: f64 = 0.25;
/// p-value below which a difference is called significant.
pub const SIGNIFICANCE: f64 = 0.05;

/// Secondary figures per cell, by name, as used in metric tables and published tables:
/// `time_s`, `req_s`, `mean_latency_us`, `ttfb_ms`, `header_savings_pct`,
/// `server_cpu_us_per_req`, `client_cpu_us_per_req`. [`CellSummary::secondary`] also holds
/// `connections`, `bytes_received` and, for page loads, `page_ttfb_ms` (the document's
/// TTFB), which the verdict of a browser experiment shows.
pub const METRICS: [&str; 7] = [
    "time_s",
    "req_s",
    "mean_latency_us",
    "ttfb_ms",
    "header_savings_pct",
    "server_cpu_us_per_req",
    "client_cpu_us_per_req",
];

/// Human header of a secondary figure.
pub fn metric_header(name: &str) -> &str {
    match name {
        "time_s" => "time (s)",
        "req_s" => "req/s",
        "mean_latency_us" => "mean latency (µs)",
        "ttfb_ms" => "TTFB p50 (ms)",
        "header_savings_pct" => "header savings (%)",
        "server_cpu_us_per_req" => "server CPU (µs/req)",
        "client_cpu_us_per_req" => "client CPU (µs/req)",
        "fcp_s" => "FCP (s)",
        "lcp_s" => "LCP (s)",
        "speed_index_s" => "Speed Index (s)",
        "connections" => "connections",
        "bytes_received" => "bytes received",
        "page_ttfb_ms" => "page TTFB (ms)",
        other => other,
    }
}

/// Secondary figures of one repetition.
fn secondary(r: &Record) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    let Some(res) = &r.result else { return m };
    m.insert("time_s", res.duration_s);
    m.insert("req_s", res.requests_per_sec());
    let lat = res.histograms.latency.percentiles();
    if lat.count > 0 {
        m.insert("mean_latency_us", lat.mean);
    }
    if !res.histograms.ttfb.is_empty() {
        m.insert("ttfb_ms", res.histograms.ttfb.quantile(0.5) as f64 / 1000.0);
    }
    if res.bytes.header_uncompressed > 0 {
        m.insert("header_savings_pct", res.bytes.header_savings() * 100.0);
    }
    if let Some(c) = r.server.as_ref().and_then(|s| s.cpu_us_per_request()) {
        m.insert("server_cpu_us_per_req", c);
    }
    if res.requests_done > 0 {
        m.insert("client_cpu_us_per_req", res.cpu_us_per_request());
    }
    // Beside the verdict of a browser experiment: what each page load cost.
    if res.connections > 0 {
        m.insert("connections", res.connections as f64);
    }
    if res.bytes.total_received > 0 {
        m.insert("bytes_received", res.bytes.total_received as f64);
    }
    if let Some(ttfb) = res
        .config
        .extra
        .get("ttfb_ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
    {
        m.insert("page_ttfb_ms", ttfb);
    }
    m
}

/// The statistics of one cell over its repetitions.
#[derive(Clone, Debug, Default)]
pub struct CellSummary {
    /// The cell's key.
    pub key: String,
    /// Its factor values.
    pub factors: BTreeMap<String, String>,
    /// Repetitions recorded.
    pub repetitions: usize,
    /// The primary metric of every clean repetition.
    pub values: Vec<f64>,
    /// Median of `values` (NaN when there is none).
    pub median: f64,
    /// Mean of `values`.
    pub mean: f64,
    /// Sample standard deviation of `values`.
    pub stdev: f64,
    /// 95 % bootstrap interval of the median.
    pub ci: (f64, f64),
    /// Medians of the secondary figures over clean repetitions (see [`METRICS`]).
    pub secondary: BTreeMap<&'static str, f64>,
    /// Connections per negotiated protocol, over all repetitions.
    pub negotiated: BTreeMap<String, u64>,
    /// The server's connections per congestion controller, read back, over all repetitions.
    pub server_cc: BTreeMap<String, u64>,
    /// The client's connections per congestion controller, read back, over all repetitions.
    pub client_cc: BTreeMap<String, u64>,
    /// Why the cell was skipped, when every repetition was.
    pub skipped: Option<String>,
    /// Problems worth a warning.
    pub warnings: Vec<String>,
    /// Repetitions that ran but were not clean (errors, failed requests, no result).
    pub failed: usize,
    /// Repetitions that ran (not skipped).
    pub ran: usize,
    /// The clean repetitions (the last record of each) as indices into [`Report::records`].
    pub clean: Vec<usize>,
    /// Where an end's congestion controllers, read back, are not what the cell asked for
    /// (one line per end; also among `warnings`).
    pub cc_mismatch: Vec<String>,
    /// The first failed repetition's explanation ([`Record::failure_text`]), when one failed.
    pub first_error: Option<String>,
    /// When connections negotiated another protocol family than the cell asked for: what
    /// they negotiated, e.g. `h2 ×5`.
    pub fell_back: Option<String>,
    /// A recorded page's replay over every repetition: hits, near misses and misses summed,
    /// the first miss kept (None: not a replay).
    pub replay: Option<hxlab_core::har::ReplayOutcome>,
    /// Repetitions whose replay had at least one miss.
    pub replay_missed_runs: usize,
}

impl CellSummary {
    /// True when the cell has at least one clean repetition and no warning.
    pub fn trusted(&self) -> bool {
        !self.values.is_empty() && self.warnings.is_empty()
    }
}

/// Which protocol family a negotiated ALPN or label belongs to.
fn family(label: &str) -> &'static str {
    match label.to_ascii_lowercase().as_str() {
        "h1" | "h1-tls" | "http/1.1" | "http/1.0" | "http1" | "http/1" => "HTTP/1.1",
        "h2" | "h2c" | "http/2" | "http2" => "HTTP/2",
        "h3" | "h3-29" | "http/3" | "http3" => "HTTP/3",
        _ => "other",
    }
}

/// Warnings when an end's congestion controllers, as read back, are not what the cell asked
/// for (`cc` for both ends, `cc_server`, `cc_client`; "default" asks for nothing).
fn cc_warnings(s: &CellSummary) -> Vec<String> {
    let mut out = Vec::new();
    for (end, factor, seen) in [
        ("server", "cc_server", &s.server_cc),
        ("client", "cc_client", &s.client_cc),
    ] {
        let Some(want) = s
            .factors
            .get(factor)
            .or_else(|| s.factors.get("cc"))
            .filter(|w| w.as_str() != "default")
        else {
            continue;
        };
        let other: Vec<String> = seen
            .iter()
            .filter(|(k, n)| **n > 0 && k.as_str() != want.as_str())
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        if !other.is_empty() {
            out.push(format!(
                "asked for {want} on the {end} but its connections ran {}",
                other.join(", ")
            ));
        } else if seen.values().all(|n| *n == 0) && s.values.len() == s.repetitions {
            out.push(format!(
                "asked for {want} on the {end} but no connection's controller was read back"
            ));
        }
    }
    out
}

fn summarise(metric: Metric, key: &str, records: &[&Record]) -> CellSummary {
    let mut s = CellSummary {
        key: key.to_string(),
        repetitions: records.len(),
        ..Default::default()
    };
    if let Some(r) = records.first() {
        s.factors = r.factors.clone();
    }
    let mut sec: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut failed_reps = 0;
    let mut first_error: Option<String> = None;
    let mut skipped = 0;
    for r in records {
        if let Some(why) = &r.skipped {
            skipped += 1;
            s.skipped.get_or_insert_with(|| why.clone());
            continue;
        }
        hxlab_core::cc::add_counts(&mut s.server_cc, &r.server_cc);
        hxlab_core::cc::add_counts(&mut s.client_cc, &r.client_cc);
        if let Some(rp) = &r.replay {
            add_replay(&mut s, rp);
        }
        if let Some(res) = &r.result {
            for (k, v) in &res.negotiated {
                *s.negotiated.entry(k.clone()).or_default() += v;
            }
            if let Some(expected) = r.expected_body_bytes {
                if res.bytes.body_received < expected && r.is_clean() {
                    s.warnings.push(format!(
                        "repetition {}: received {} of {} body bytes",
                        r.repetition, res.bytes.body_received, expected
                    ));
                }
            }
        }
        if r.is_clean() {
            if let Some(res) = &r.result {
                let v = metric.of(res);
                if v.is_finite() {
                    s.values.push(v);
                } else {
                    s.warnings.push(format!(
                        "repetition {}: no {} recorded",
                        r.repetition,
                        metric.label()
                    ));
                }
            }
            for (k, v) in secondary(r) {
                sec.entry(k).or_default().push(v);
            }
        } else {
            failed_reps += 1;
            if first_error.is_none() {
                first_error = Some(r.failure_text());
            }
        }
    }
    if skipped < records.len() {
        s.skipped = None;
    }
    s.failed = failed_reps;
    s.first_error = first_error.clone();
    s.ran = records.len() - skipped;
    if failed_reps > 0 {
        s.warnings.push(format!(
            "{failed_reps} of {} repetitions had errors (first: {})",
            records.len() - skipped,
            first_error.unwrap_or_default()
        ));
    }
    if let Some(proto) = s.factors.get("protocol") {
        let want = family(proto);
        let other: Vec<String> = s
            .negotiated
            .iter()
            .filter(|(k, n)| **n > 0 && family(k) != want)
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        if !other.is_empty() {
            s.warnings.push(format!(
                "asked for {proto} ({want}) but connections negotiated {}",
                other.join(", ")
            ));
            s.fell_back = Some(other.join(", "));
        }
    }
    if let Some(rp) = s.replay.as_ref().filter(|rp| rp.tally.misses > 0) {
        s.warnings.push(format!(
            "the replayed recording missed {} request(s) in {} of {} repetitions (first: {})",
            rp.tally.misses,
            s.replay_missed_runs,
            records.len() - skipped,
            rp.first_miss.as_deref().unwrap_or("not listed")
        ));
    }
    s.cc_mismatch = cc_warnings(&s);
    s.warnings.extend(s.cc_mismatch.iter().cloned());
    s.median = stats::median(&s.values);
    s.mean = stats::mean(&s.values);
    s.stdev = stats::stdev(&s.values);
    s.ci = stats::bootstrap_ci(&s.values, CONFIDENCE, RESAMPLES, stats::median);
    if s.values.len() >= 3 && s.median > 0.0 && (s.ci.1 - s.ci.0) / s.median > WIDE_SPREAD {
        s.warnings.push(format!(
            "wide spread: the 95 % interval spans {:.0} % of the median; run more repetitions or on a quieter machine",
            (s.ci.1 - s.ci.0) / s.median * 100.0
        ));
    }
    s.secondary = sec
        .into_iter()
        .map(|(k, v)| (k, stats::median(&v)))
        .collect();
    s
}

/// Adds one repetition's replay counts to its cell's.
fn add_replay(s: &mut CellSummary, rp: &hxlab_core::har::ReplayOutcome) {
    let sum = s.replay.get_or_insert_with(Default::default);
    sum.tally.add(&rp.tally);
    if sum.first_miss.is_none() {
        sum.first_miss.clone_from(&rp.first_miss);
    }
    s.replay_missed_runs += usize::from(rp.tally.misses > 0);
}

/// A figure in a table: median with its interval, flagged when it should not be trusted.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The value.
    pub value: f64,
    /// Its 95 % interval, for our own figures.
    pub ci: Option<(f64, f64)>,
    /// True when the cell has warnings.
    pub warn: bool,
}

/// One row of a table.
#[derive(Clone, Debug)]
pub struct TableRow {
    /// Row label (protocol and the other conditions).
    pub label: String,
    /// True for a row of published figures.
    pub published: bool,
    /// One figure per column.
    pub cells: Vec<Option<Figure>>,
}

/// A table laid out like the studies': conditions as columns, protocols as rows.
#[derive(Clone, Debug)]
pub struct Table {
    /// Title (metric and fixed conditions).
    pub title: String,
    /// Header of the label column (the column factor's name).
    pub corner: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows.
    pub rows: Vec<TableRow>,
}

/// Everything the exporters show.
#[derive(Clone, Debug)]
pub struct Report {
    /// The experiment.
    pub meta: ExperimentMeta,
    /// The primary metric.
    pub metric: Metric,
    /// Every record, in file order.
    pub records: Vec<Record>,
    /// Per-cell statistics, in run order.
    pub cells: Vec<CellSummary>,
    /// Tables with published rows interleaved.
    pub tables: Vec<Table>,
    /// Protocol comparisons per condition.
    pub comparisons: Vec<Comparison>,
    /// Warnings, one line each, naming the cell.
    pub warnings: Vec<String>,
    /// This run against an earlier one, when a baseline was given.
    pub before_after: Option<crate::baseline::BeforeAfter>,
}

/// Formats a number with three significant digits (no exponent for ordinary magnitudes).
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{:.0}", x)
    } else if a >= 100.0 {
        format!("{:.1}", x)
    } else if a >= 10.0 {
        format!("{:.2}", x)
    } else if a >= 0.01 {
        format!("{:.3}", x)
    } else {
        format!("{:.2e}", x)
    }
}

impl Report {
    /// Computes statistics, tables, comparisons, charts and warnings from the records.
    /// For each (cell, repetition) the last record wins, so a resumed run that retried a
    /// failed repetition reports the retry.
    pub fn build(meta: ExperimentMeta, records: Vec<Record>) -> Report {
        let metric = meta.metric();
        let mut latest: BTreeMap<(String, u32), usize> = BTreeMap::new();
        for (i, r) in records.iter().enumerate() {
            latest.insert((r.cell.clone(), r.repetition), i);
        }
        let mut by_cell: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut order: Vec<String> = meta.cells.clone();
        for &i in latest.values() {
            let r = &records[i];
            if !order.contains(&r.cell) {
                order.push(r.cell.clone());
            }
            by_cell.entry(r.cell.clone()).or_default().push(i);
        }
        let cells: Vec<CellSummary> = order
            .iter()
            .filter_map(|k| {
                let idx = by_cell.get(k)?;
                let rs: Vec<&Record> = idx.iter().map(|&i| &records[i]).collect();
                let mut s = summarise(metric, k, &rs);
                s.clean = idx
                    .iter()
                    .copied()
                    .filter(|&i| records[i].is_clean())
                    .collect();
                Some(s)
            })
            .collect();
        let mut warnings = Vec::new();
        for c in &cells {
            for w in &c.warnings {
                warnings.push(format!("{}: {w}", c.key));
            }
        }
        let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
        for c in &cells {
            if let Some(why) = &c.skipped {
                *skipped.entry(why.clone()).or_default() += 1;
            }
        }
        for (why, n) in skipped {
            warnings.push(format!("{n} cell(s) skipped: {why}"));
        }
        let mut report = Report {
            metric,
            records: Vec::new(),
            cells,
            tables: Vec::new(),
            comparisons: Vec::new(),
            warnings,
            before_after: None,
            meta,
        };
        report.tables = report.build_tables();
        report.comparisons = report.build_comparisons();
        report.records = records;
        report
    }

    /// Factor names with more than one level, in display order.
    pub(crate) fn swept(&self) -> Vec<String> {
        let mut names: Vec<String> = self.meta.swept().iter().map(|f| f.name.clone()).collect();
        if names.is_empty() {
            // A file that lost its meta: infer from the cells.
            let mut levels: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for c in &self.cells {
                for (k, v) in &c.factors {
                    let l = levels.entry(k).or_default();
                    if !l.contains(&v.as_str()) {
                        l.push(v);
                    }
                }
            }
            names = levels
                .into_iter()
                .filter(|(_, l)| l.len() > 1)
                .map(|(k, _)| k.to_string())
                .collect();
        }
        names
    }

    pub(crate) fn levels_of(&self, factor: &str) -> Vec<String> {
        if let Some(l) = self.meta.levels(factor) {
            return l.to_vec();
        }
        let mut out: Vec<String> = Vec::new();
        for c in &self.cells {
            if let Some(v) = c.factors.get(factor) {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        out
    }

    fn column_factor(&self) -> Option<String> {
        let swept = self.swept();
        if let Some(c) = &self.meta.columns {
            if swept.contains(c) {
                return Some(c.clone());
            }
        }
        swept.into_iter().find(|f| f != "protocol")
    }

    /// Row groups: every combination of the swept factors other than `exclude`, in level
    /// order, outer factors first and the protocol innermost (as the studies lay them out).
    pub(crate) fn row_keys(&self, exclude: Option<&str>) -> Vec<Vec<(String, String)>> {
        let mut names: Vec<String> = self
            .swept()
            .into_iter()
            .filter(|f| Some(f.as_str()) != exclude && f != "protocol")
            .collect();
        if self.swept().iter().any(|f| f == "protocol") {
            names.push("protocol".into());
        }
        let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for n in &names {
            let mut next = Vec::new();
            for c in &combos {
                for l in self.levels_of(n) {
                    let mut c2 = c.clone();
                    c2.push((n.clone(), l));
                    next.push(c2);
                }
            }
            combos = next;
        }
        // Keep only combinations some cell has.
        combos.retain(|combo| {
            self.cells
                .iter()
                .any(|c| combo.iter().all(|(k, v)| c.factors.get(k) == Some(v)))
        });
        combos
    }

    pub(crate) fn row_label(combo: &[(String, String)]) -> String {
        if combo.is_empty() {
            return "all".into();
        }
        // Protocol first, then the conditions, as "h2, 10ms".
        let mut parts: Vec<String> = combo
            .iter()
            .filter(|(k, _)| k == "protocol")
            .map(|(_, v)| v.clone())
            .collect();
        parts.extend(
            combo
                .iter()
                .filter(|(k, _)| k != "protocol")
                .map(|(k, v)| format!("{k} {v}")),
        );
        parts.join(", ")
    }

    pub(crate) fn find_cell(
        &self,
        combo: &[(String, String)],
        extra: Option<(&str, &str)>,
    ) -> Option<&CellSummary> {
        self.cells.iter().find(|c| {
            combo.iter().all(|(k, v)| c.factors.get(k) == Some(v))
                && extra.is_none_or(|(k, v)| c.factors.get(k).map(String::as_str) == Some(v))
        })
    }

    fn fixed_conditions(&self) -> String {
        let fixed: Vec<String> = self
            .meta
            .factors
            .iter()
            .filter(|f| f.levels.len() == 1)
            .map(|f| format!("{} {}", f.name, f.levels[0]))
            .collect();
        fixed.join(", ")
    }

    /// Our table (published rows interleaved), then the published tables none of it took in.
    fn build_tables(&self) -> Vec<Table> {
        let fixed = self.fixed_conditions();
        let suffix = if fixed.is_empty() {
            String::new()
        } else {
            format!(" — {fixed}")
        };
        let mut used_published = vec![false; self.meta.published.len()];
        let ours = match self.column_factor() {
            Some(col) => self.factor_table(&col, &suffix, &mut used_published),
            None => self.metrics_table(&suffix, &mut used_published),
        };
        let mut tables = vec![ours];
        tables.extend(self.unused_published_tables(&used_published));
        tables
    }

    /// The primary metric by the levels of `col`, published rows beside the rows they match.
    fn factor_table(&self, col: &str, suffix: &str, used_published: &mut [bool]) -> Table {
        let levels = self.levels_of(col);
        let mut table = Table {
            title: format!("{} by {col}{suffix}", self.metric.label()),
            corner: col.to_string(),
            columns: levels.clone(),
            rows: Vec::new(),
        };
        let published: Vec<usize> = (0..self.meta.published.len())
            .filter(|&i| self.meta.published[i].column_factor.as_deref() == Some(col))
            .collect();
        let row_keys = self.row_keys(Some(col));
        for combo in &row_keys {
            table.rows.push(self.factor_row(combo, col, &levels));
            for &pi in &published {
                let pt = &self.meta.published[pi];
                for prow in &pt.rows {
                    if published_row_matches(prow, combo) {
                        used_published[pi] = true;
                        table.rows.push(published_row(prow, &pt.columns, &levels));
                    }
                }
            }
        }
        // Published rows that match none of ours still belong in the table.
        for &pi in &published {
            let pt = &self.meta.published[pi];
            for prow in &pt.rows {
                let matched = row_keys
                    .iter()
                    .any(|combo| published_row_matches(prow, combo));
                if !matched {
                    used_published[pi] = true;
                    table.rows.push(published_row(prow, &pt.columns, &levels));
                }
            }
        }
        table
    }

    /// Our row for one combination of the other factors: the median at each level of `col`.
    fn factor_row(&self, combo: &[(String, String)], col: &str, levels: &[String]) -> TableRow {
        let cells = levels
            .iter()
            .map(|l| {
                self.find_cell(combo, Some((col, l))).and_then(|c| {
                    c.median.is_finite().then_some(Figure {
                        value: c.median,
                        ci: Some(c.ci),
                        warn: !c.warnings.is_empty(),
                    })
                })
            })
            .collect();
        TableRow {
            label: Self::row_label(combo),
            published: false,
            cells,
        }
    }

    /// Every metric as a column (no column factor), published rows beside the cells they match.
    fn metrics_table(&self, suffix: &str, used_published: &mut [bool]) -> Table {
        let keys = self.metric_columns();
        let columns: Vec<String> = keys.iter().map(|m| m.to_string()).collect();
        let mut table = Table {
            title: format!("figures per protocol{suffix}"),
            corner: "protocol".into(),
            columns: keys.iter().map(|m| metric_header(m).to_string()).collect(),
            rows: Vec::new(),
        };
        let published: Vec<usize> = (0..self.meta.published.len())
            .filter(|&i| self.meta.published[i].column_factor.is_none())
            .collect();
        for combo in self.row_keys(None) {
            let Some(c) = self.find_cell(&combo, None) else {
                continue;
            };
            table.rows.push(TableRow {
                label: Self::row_label(&combo),
                published: false,
                cells: self.metric_figures(c),
            });
            for &pi in &published {
                let pt = &self.meta.published[pi];
                for prow in &pt.rows {
                    if prow
                        .factors
                        .iter()
                        .all(|(k, v)| c.factors.get(k) == Some(v))
                    {
                        used_published[pi] = true;
                        table.rows.push(published_row(prow, &pt.columns, &columns));
                    }
                }
            }
        }
        table
    }

    /// The metrics table's columns: [`METRICS`], after the primary metric when it is not one
    /// of them (a page metric).
    fn metric_columns(&self) -> Vec<&'static str> {
        let primary = metric_key(self.metric);
        let mut keys: Vec<&'static str> = Vec::new();
        if !METRICS.contains(&primary) {
            keys.push(primary);
        }
        keys.extend(METRICS);
        keys
    }

    /// One cell's figure for each metrics-table column, the primary metric with its interval.
    fn metric_figures(&self, c: &CellSummary) -> Vec<Option<Figure>> {
        self.metric_columns()
            .iter()
            .map(|m| {
                let value = if *m == metric_key(self.metric) {
                    Some(c.median)
                } else {
                    c.secondary.get(m).copied()
                };
                value.filter(|v| v.is_finite()).map(|value| Figure {
                    value,
                    ci: (*m == metric_key(self.metric)).then_some(c.ci),
                    warn: !c.warnings.is_empty(),
                })
            })
            .collect()
    }

    /// Published tables laid out along another factor (none of their rows used), as published.
    fn unused_published_tables(&self, used_published: &[bool]) -> Vec<Table> {
        self.meta
            .published
            .iter()
            .enumerate()
            .filter(|&(pi, _)| !used_published[pi])
            .map(|(_, pt)| Table {
                title: format!("published: {}", pt.title),
                corner: pt.column_factor.clone().unwrap_or_default(),
                columns: pt
                    .columns
                    .iter()
                    .map(|c| metric_header(c).to_string())
                    .collect(),
                rows: pt
                    .rows
                    .iter()
                    .map(|r| TableRow {
                        label: format!("{} (published)", r.label),
                        published: true,
                        cells: r
                            .values
                            .iter()
                            .map(|v| {
                                v.map(|value| Figure {
                                    value,
                                    ci: None,
                                    warn: false,
                                })
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect()
    }
}

fn metric_key(m: Metric) -> &'static str {
    m.key()
}

/// True when a published row names factor values and our row `combo` has every one of them.
fn published_row_matches(prow: &crate::model::PublishedRow, combo: &[(String, String)]) -> bool {
    !prow.factors.is_empty()
        && prow
            .factors
            .iter()
            .all(|(k, v)| combo.iter().any(|(ck, cv)| ck == k && cv == v))
}

fn published_row(
    prow: &crate::model::PublishedRow,
    pcols: &[String],
    our_cols: &[String],
) -> TableRow {
    let cells = our_cols
        .iter()
        .map(|c| {
            pcols
                .iter()
                .position(|pc| pc == c)
                .and_then(|i| prow.values.get(i).copied().flatten())
                .map(|value| Figure {
                    value,
                    ci: None,
                    warn: false,
                })
        })
        .collect();
    TableRow {
        label: format!("{} (published)", prow.label),
        published: true,
        cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FactorLevels, PublishedRow, PublishedTable, Workload};
    use hxlab_core::RunResult;

    fn rec(protocol: &str, delay: &str, rep: u32, secs: f64, negotiated: &str) -> Record {
        let mut res = RunResult {
            schema: 1,
            duration_s: secs,
            requests_started: 10,
            requests_done: 10,
            requests_succeeded: 10,
            connections: 1,
            ..Default::default()
        };
        res.negotiated.insert(negotiated.into(), 1);
        let mut factors = BTreeMap::new();
        factors.insert("protocol".to_string(), protocol.to_string());
        factors.insert("delay".to_string(), delay.to_string());
        Record {
            experiment: "t".into(),
            cell: format!("protocol={protocol} delay={delay}"),
            factors,
            repetition: rep,
            result: Some(res),
            ..Default::default()
        }
    }

    fn meta() -> ExperimentMeta {
        ExperimentMeta {
            name: "t".into(),
            title: "t".into(),
            workload: Some(Workload::Resources),
            repetitions: 10,
            factors: vec![
                FactorLevels {
                    name: "protocol".into(),
                    levels: vec!["h1".into(), "h2".into()],
                },
                FactorLevels {
                    name: "delay".into(),
                    levels: vec!["0ms".into(), "30ms".into()],
                },
            ],
            published: vec![PublishedTable {
                title: "seed".into(),
                source: "s".into(),
                column_factor: Some("delay".into()),
                columns: vec!["0ms".into(), "30ms".into()],
                rows: vec![PublishedRow {
                    label: "h2".into(),
                    factors: [("protocol".to_string(), "h2".to_string())].into(),
                    values: vec![Some(0.48), Some(0.48)],
                }],
            }],
            ..Default::default()
        }
    }

    fn synthetic() -> Vec<Record> {
        let mut v = Vec::new();
        for rep in 0..10 {
            let jitter = rep as f64 * 0.001;
            v.push(rec("h1", "0ms", rep, 0.100 + jitter, "http/1.1"));
            v.push(rec("h2", "0ms", rep, 0.050 + jitter, "h2"));
            v.push(rec("h1", "30ms", rep, 0.400 + jitter, "http/1.1"));
            v.push(rec("h2", "30ms", rep, 0.100 + jitter, "h2"));
        }
        v
    }

    #[test]
    fn statistics_of_known_values() {
        let r = Report::build(meta(), synthetic());
        let h1 = r
            .cells
            .iter()
            .find(|c| c.key == "protocol=h1 delay=0ms")
            .expect("cell");
        assert_eq!(h1.values.len(), 10);
        assert!((h1.median - 0.1045).abs() < 1e-9, "{}", h1.median);
        assert!((h1.mean - 0.1045).abs() < 1e-9);
        assert!(h1.ci.0 <= h1.median && h1.median <= h1.ci.1);
        assert!(h1.warnings.is_empty(), "{:?}", h1.warnings);
    }

    #[test]
    fn comparison_ratio_and_significance() {
        let r = Report::build(meta(), synthetic());
        let c = r
            .comparisons
            .iter()
            .find(|c| c.condition == "delay 30ms")
            .expect("comparison");
        assert_eq!(c.protocol, "h2");
        assert_eq!(c.baseline, "h1");
        assert!((c.ratio - 0.1045 / 0.4045).abs() < 1e-9);
        assert!(c.significant());
        assert!(c.ci.0 <= c.ratio && c.ratio <= c.ci.1);
        let s = c.sentence();
        assert!(s.starts_with("h2 vs h1: 0.26× ("), "{s}");
        assert!(s.ends_with(", p = 0.000, n = 10+10"), "{s}");
        assert_eq!(crate::verdict::judge(c), crate::verdict::Finding::Better);
    }

    #[test]
    fn tables_put_conditions_in_columns_and_published_beside_ours() {
        let r = Report::build(meta(), synthetic());
        let t = &r.tables[0];
        assert_eq!(t.corner, "delay");
        assert_eq!(t.columns, vec!["0ms", "30ms"]);
        let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, vec!["h1", "h2", "h2 (published)"]);
        assert_eq!(t.rows[2].cells[0].as_ref().map(|f| f.value), Some(0.48));
        assert!((t.rows[1].cells[1].as_ref().expect("figure").value - 0.1045).abs() < 1e-9);
        let charts = crate::charts::all(&r);
        assert_eq!(charts[0].id, "chart-delay");
        assert_eq!(charts[0].svg.matches("class=\"series\"").count(), 2);
    }

    #[test]
    fn warns_on_fallback_errors_and_wide_spread() {
        let mut recs = synthetic();
        // h2 that fell back to HTTP/1.1.
        for r in recs
            .iter_mut()
            .filter(|r| r.cell == "protocol=h2 delay=0ms")
        {
            if let Some(res) = r.result.as_mut() {
                res.negotiated.clear();
                res.negotiated.insert("http/1.1".into(), 1);
            }
        }
        // Errors in one repetition.
        if let Some(res) = recs[0].result.as_mut() {
            res.requests_failed = 2;
            res.errors.connect = 2;
            res.error_samples.push("connection refused".into());
        }
        // Wide spread.
        for (i, r) in recs
            .iter_mut()
            .filter(|r| r.cell == "protocol=h1 delay=30ms")
            .enumerate()
        {
            if let Some(res) = r.result.as_mut() {
                res.duration_s = if i % 2 == 0 { 0.1 } else { 0.9 };
            }
        }
        let r = Report::build(meta(), recs);
        let all = r.warnings.join("\n");
        assert!(
            all.contains(
                "protocol=h2 delay=0ms: asked for h2 (HTTP/2) but connections negotiated http/1.1"
            ),
            "{all}"
        );
        assert!(all.contains("protocol=h1 delay=0ms: 1 of 10 repetitions had errors (first: 2 of 10 requests failed (connection refused))"), "{all}");
        assert!(all.contains("protocol=h1 delay=30ms: wide spread"), "{all}");
        let h1 = r
            .cells
            .iter()
            .find(|c| c.key == "protocol=h1 delay=0ms")
            .expect("cell");
        assert_eq!(
            h1.values.len(),
            9,
            "the failed repetition is left out of the statistics"
        );
    }

    #[test]
    fn last_record_of_a_repetition_wins_and_skips_are_reported() {
        let mut recs = synthetic();
        let mut retry = rec("h1", "0ms", 0, 5.0, "http/1.1");
        retry.cell = "protocol=h1 delay=0ms".into();
        recs.push(retry);
        let mut skipped = rec("h1", "90ms", 0, 0.0, "http/1.1");
        skipped.result = None;
        skipped.skipped = Some("link emulation is not available here: not root".into());
        recs.push(skipped);
        let r = Report::build(meta(), recs);
        let h1 = r
            .cells
            .iter()
            .find(|c| c.key == "protocol=h1 delay=0ms")
            .expect("cell");
        assert!(h1.values.contains(&5.0) && !h1.values.contains(&0.1));
        assert!(
            r.warnings
                .iter()
                .any(|w| w == "1 cell(s) skipped: link emulation is not available here: not root"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn factors_tied_to_the_protocol_do_not_block_comparisons() {
        let mut recs = synthetic();
        for r in recs.iter_mut() {
            let c = if r.factors["protocol"] == "h1" {
                "10"
            } else {
                "1"
            };
            r.factors.insert("clients".into(), c.into());
            r.cell = format!("{} clients={c}", r.cell);
        }
        let mut m = meta();
        m.factors.push(FactorLevels {
            name: "clients".into(),
            levels: vec!["10".into(), "1".into()],
        });
        let r = Report::build(m, recs);
        let conds: Vec<&str> = r.comparisons.iter().map(|c| c.condition.as_str()).collect();
        assert_eq!(conds, vec!["delay 0ms", "delay 30ms"]);
    }

    #[test]
    fn exact_mann_whitney_for_small_samples() {
        // 3 against 3, fully separated: 2 of 20 arrangements are as extreme.
        assert!((mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 0.1).abs() < 1e-12);
        // 5 against 5, fully separated: 2 of 252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // Interleaved: no evidence.
        assert!(mann_whitney_p(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0]) > 0.5);
        // Ties fall back to the normal approximation.
        assert!(mann_whitney_p(&[1.0, 1.0, 1.0, 1.0], &[2.0, 2.0, 2.0, 2.0]) < 0.05);
    }

    #[test]
    fn fmt_num_is_readable() {
        assert_eq!(fmt_num(0.51234), "0.512");
        assert_eq!(fmt_num(20.72), "20.72");
        assert_eq!(fmt_num(13600.4), "13600");
        assert_eq!(fmt_num(f64::NAN), "—");
    }
}
