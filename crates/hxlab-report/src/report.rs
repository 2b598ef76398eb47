//! The report: everything a format shows, built once from the records — per-cell
//! statistics ([`crate::cells`]), tables laid out like the studies' with their published
//! rows, the protocol comparisons, the warnings and, against a baseline run, the before and
//! after. The formats only read it, so they cannot disagree.

use crate::baseline::BeforeAfter;
use crate::cells::{summarise, CellSummary};
use crate::comparisons::{compare_values, Comparison};
use crate::figures::{metric_header, METRICS};
use crate::model::{ExperimentMeta, Metric, Record};
use std::collections::{BTreeMap, BTreeSet};

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
    pub before_after: Option<BeforeAfter>,
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

impl Report {
    /// The baseline protocol: the experiment's, or the first listed.
    pub fn baseline_protocol(&self) -> Option<String> {
        self.meta
            .baseline
            .clone()
            .or_else(|| self.levels_of("protocol").first().cloned())
    }

    /// Factors tied to the protocol (each protocol has its own single value, as when
    /// [[matrix]] gives HTTP/1.1 10 connections and HTTP/2 one with 100 streams): part of
    /// what is compared, not conditions to hold equal.
    pub(crate) fn tied_factors(&self) -> Vec<String> {
        let mut tied = Vec::new();
        for f in &self.meta.factors {
            if f.name == "protocol" {
                continue;
            }
            let mut per_proto: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for c in &self.cells {
                if let (Some(p), Some(v)) = (c.factors.get("protocol"), c.factors.get(&f.name)) {
                    let l = per_proto.entry(p).or_default();
                    if !l.contains(&v.as_str()) {
                        l.push(v);
                    }
                }
            }
            let single = per_proto.values().all(|l| l.len() == 1);
            let differ = per_proto
                .values()
                .map(|l| l[0])
                .collect::<BTreeSet<_>>()
                .len()
                > 1;
            if single && differ {
                tied.push(f.name.clone());
            }
        }
        tied
    }

    /// The pairs compared: every protocol against the baseline, then each protocol against
    /// the one listed before it when neither is the baseline.
    pub(crate) fn comparison_pairs(&self) -> Vec<(String, String)> {
        let protocols = self.levels_of("protocol");
        let Some(baseline) = self.baseline_protocol() else {
            return Vec::new();
        };
        let mut pairs: Vec<(String, String)> = protocols
            .iter()
            .filter(|p| **p != baseline)
            .map(|p| (p.clone(), baseline.clone()))
            .collect();
        for w in protocols.windows(2) {
            let (prev, p) = (&w[0], &w[1]);
            if *p != baseline && *prev != baseline {
                pairs.push((p.clone(), prev.clone()));
            }
        }
        pairs
    }

    /// The comparisons of the primary metric (kept in [`Report::comparisons`]).
    pub(crate) fn build_comparisons(&self) -> Vec<Comparison> {
        self.comparisons_by(self.metric, &|c: &CellSummary| c.values.clone())
    }

    /// The same comparisons on another figure of the same runs, e.g. the load event of a
    /// browser experiment whose primary metric is LCP. Repetitions that did not record it
    /// are left out; a pair whose cells recorded none is not compared.
    pub fn comparisons_of(&self, metric: Metric) -> Vec<Comparison> {
        if metric == self.metric {
            return self.comparisons.clone();
        }
        self.comparisons_by(metric, &|c: &CellSummary| {
            c.clean
                .iter()
                .filter_map(|&i| self.records.get(i)?.result.as_ref())
                .map(|res| metric.of(res))
                .filter(|v| v.is_finite())
                .collect()
        })
    }

    /// Every pair under every condition, each cell's values taken by `values`.
    fn comparisons_by(
        &self,
        metric: Metric,
        values: &dyn Fn(&CellSummary) -> Vec<f64>,
    ) -> Vec<Comparison> {
        let tied = self.tied_factors();
        let mut out = Vec::new();
        for (p, reference) in self.comparison_pairs() {
            for base in self
                .cells
                .iter()
                .filter(|c| c.factors.get("protocol") == Some(&reference))
            {
                if let Some(c) = self.compare_cells(&p, base, &tied, metric, values) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// `protocol`'s cell under `base`'s conditions compared with `base`.
    fn compare_cells(
        &self,
        protocol: &str,
        base: &CellSummary,
        tied: &[String],
        metric: Metric,
        values: &dyn Fn(&CellSummary) -> Vec<f64>,
    ) -> Option<Comparison> {
        let reference = base.factors.get("protocol")?;
        let other = self.cells.iter().find(|c| {
            c.factors.get("protocol").map(String::as_str) == Some(protocol)
                && base
                    .factors
                    .iter()
                    .filter(|(k, _)| *k != "protocol" && !tied.contains(k))
                    .all(|(k, v)| c.factors.get(k) == Some(v))
        })?;
        let conditions: Vec<(String, String)> = self
            .meta
            .factors
            .iter()
            .filter(|f| f.levels.len() > 1 && f.name != "protocol" && !tied.contains(&f.name))
            .filter_map(|f| {
                base.factors
                    .get(&f.name)
                    .map(|v| (f.name.clone(), v.clone()))
            })
            .collect();
        let (other_values, base_values) = (values(other), values(base));
        let (ratio, ci, shift, p_value) = compare_values(metric, &other_values, &base_values)?;
        Some(Comparison {
            condition: conditions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            conditions,
            protocol: protocol.to_string(),
            baseline: reference.clone(),
            ratio,
            ci,
            shift,
            p_value,
            n: (other_values.len(), base_values.len()),
            metric,
            cells: (other.key.clone(), base.key.clone()),
        })
    }
}

impl Report {
    /// This run against an earlier one (`hxlab report --baseline`), its cells matched by
    /// their factor values. Refuses runs of different metrics (a throughput run is not a
    /// page-load run).
    pub fn against(&self, before: &Report, baseline: &str) -> Result<BeforeAfter, String> {
        if self.metric != before.metric {
            return Err(format!(
                "{baseline} measures {} and this run {}: nothing to compare",
                before.metric.label(),
                self.metric.label()
            ));
        }
        Ok(BeforeAfter::build(
            self.metric,
            &self.cells,
            &before.cells,
            baseline,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparisons::mann_whitney_p;
    use crate::figures::fmt_num;
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
    fn an_h3_cell_that_discovers_uses_what_it_found_and_is_not_a_fallback() {
        let mut recs = Vec::new();
        for discovery in ["forced", "alt-svc"] {
            for rep in 0..5 {
                let mut r = rec("h3", "0ms", rep, 0.1, "h2");
                r.factors.insert("discovery".into(), discovery.into());
                r.cell = format!("protocol=h3 discovery={discovery}");
                recs.push(r);
            }
        }
        let r = Report::build(meta(), recs);
        let cell = |d: &str| {
            r.cells
                .iter()
                .find(|c| c.key == format!("protocol=h3 discovery={d}"))
                .expect("cell")
        };
        assert!(
            cell("forced").fell_back.is_some(),
            "forced h3 over h2 fell back"
        );
        assert_eq!(cell("alt-svc").fell_back, None);
        assert!(
            cell("alt-svc").warnings.is_empty(),
            "{:?}",
            cell("alt-svc").warnings
        );
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
