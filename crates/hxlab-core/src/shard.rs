//! Runs in parts: which part of which run a [`RunResult`] holds ([`ShardInfo`]), the check
//! that a set of parts is one whole run — every shard exactly once, nothing counted twice
//! ([`check_parts`]) — and the wall-clock times (`--start-at`) the parts agree on
//! ([`parse_instant`], [`format_instant`]).
//!
//! A run of `hxlab load` is always a part: shard 0 of 1 of its own run id when it runs
//! alone, shard I of N of a shared run id with `--shard I/N`. [`RunResult::merge`] keeps the
//! parts' records side by side, so a merged result says what it is made of and can be merged
//! again under the same check.

use crate::result::{RunConfig, RunResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One part of a run, as recorded by the process that ran it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShardInfo {
    /// The run this part belongs to: `--run-id`, or derived from the command line and
    /// `--start-at` for shards, or random for a run on its own.
    pub run_id: String,
    /// This part's index, 0..count.
    pub index: u64,
    /// How many parts the run has.
    pub count: u64,
    /// Connections this part opened (its share of the run's `-c`).
    pub clients: u64,
    /// Requests this part was given: its share of `-n` (closed model), or of the open
    /// model's timetable of `-n` requests; 0 when `-D` bounds the run.
    pub requests: u64,
    /// The agreed start (`--start-at`), Unix seconds; None when the part started at once.
    pub start_at_unix_s: Option<f64>,
    /// When this part actually started its timetable (after waiting for `--start-at`).
    pub started_unix_s: f64,
    /// `started_unix_s − start_at_unix_s`: how late this part started (None without
    /// `--start-at`). Includes this machine's clock error against the others'.
    pub start_skew_s: Option<f64>,
    /// The skew exceeded `--start-tolerance`.
    pub late: bool,
}

/// One input of a merge, named for messages ("a.json", "stdin document 3").
pub struct Part<'a> {
    /// Where it came from.
    pub label: String,
    /// The result.
    pub result: &'a RunResult,
}

/// What [`check_parts`] found about one run id.
#[derive(Clone, Debug, PartialEq)]
pub struct RunParts {
    /// The run id.
    pub run_id: String,
    /// Parts the run has.
    pub count: u64,
    /// Indices present.
    pub present: Vec<u64>,
    /// Indices absent.
    pub missing: Vec<u64>,
}

/// Checks that `parts` may be merged into one result: the same configuration (unless
/// `mixed`), time series of the same interval width (even with `mixed`), no part twice (the same shard of the same run, or the same document), shard
/// counts that agree and indices in range; and, unless `allow_partial`, every shard of every
/// run present. Returns what was found per run; the error is one line.
pub fn check_parts(
    parts: &[Part<'_>],
    mixed: bool,
    allow_partial: bool,
) -> Result<Vec<RunParts>, String> {
    // Even with `mixed`: interval i of one part must be the same time as interval i of
    // another, or the merged series would add unrelated seconds.
    let widths = parts.iter().filter(|p| p.result.interval_s > 0.0);
    if let Some(first) = widths.clone().next() {
        if let Some(p) = widths
            .clone()
            .find(|p| p.result.interval_s != first.result.interval_s)
        {
            return Err(format!(
                "{} and {} recorded their time series at different intervals ({} s vs {} s); run the parts with the same --interval",
                first.label, p.label, first.result.interval_s, p.result.interval_s
            ));
        }
    }
    if let Some(first) = parts.first() {
        for p in &parts[1..] {
            if !mixed && p.result.config != first.result.config {
                return Err(format!(
                    "{} and {} ran different configurations ({}); merge parts of one run, or pass --mixed to add them anyway",
                    first.label,
                    p.label,
                    config_difference(&first.result.config, &p.result.config)
                ));
            }
        }
    }
    // Run id → count, index → where it came from.
    let mut runs: BTreeMap<&str, (u64, &str, BTreeMap<u64, &str>)> = BTreeMap::new();
    let mut anonymous: BTreeMap<String, &str> = BTreeMap::new();
    for p in parts {
        if p.result.shards.is_empty() {
            // Written before parts were recorded: only a document seen twice is caught.
            let key = serde_json::to_string(p.result).unwrap_or_default();
            if let Some(other) = anonymous.insert(key, &p.label) {
                return Err(format!(
                    "{} and {} are the same result; each part is merged once",
                    other, p.label
                ));
            }
            continue;
        }
        for s in &p.result.shards {
            let entry = runs
                .entry(&s.run_id)
                .or_insert((s.count, &p.label, BTreeMap::new()));
            if entry.0 != s.count {
                return Err(format!(
                    "run {}: {} says {} shards, {} says {}",
                    s.run_id, entry.1, entry.0, p.label, s.count
                ));
            }
            if s.index >= s.count {
                return Err(format!(
                    "{}: shard index {} of {} is out of range",
                    p.label, s.index, s.count
                ));
            }
            if let Some(other) = entry.2.insert(s.index, &p.label) {
                return Err(format!(
                    "run {}: shard {} of {} appears twice ({} and {}); each part is merged once",
                    s.run_id, s.index, s.count, other, p.label
                ));
            }
        }
    }
    let mut out = Vec::new();
    for (run_id, (count, _, seen)) in runs {
        let present: Vec<u64> = seen.keys().copied().collect();
        let missing: Vec<u64> = (0..count).filter(|i| !seen.contains_key(i)).collect();
        if !missing.is_empty() && !allow_partial {
            return Err(format!(
                "run {run_id}: {} of {count} shards missing (shard {}); merge every shard, or pass --allow-partial",
                missing.len(),
                list(&missing)
            ));
        }
        out.push(RunParts {
            run_id: run_id.to_string(),
            count,
            present,
            missing,
        });
    }
    Ok(out)
}

/// "0, 2, 5" (the first 20, then "…").
pub fn list(ids: &[u64]) -> String {
    let mut s: Vec<String> = ids.iter().take(20).map(|i| i.to_string()).collect();
    if ids.len() > 20 {
        s.push(format!("… ({} in all)", ids.len()));
    }
    s.join(", ")
}

/// The first fields in which two configurations differ, "protocol h1 vs h3".
fn config_difference(a: &RunConfig, b: &RunConfig) -> String {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return "unreadable".into();
    };
    let mut diffs = Vec::new();
    for (k, va) in &a {
        let vb = b.get(k).unwrap_or(&serde_json::Value::Null);
        if va != vb {
            diffs.push(format!("{k} {va} vs {vb}"));
        }
    }
    diffs.truncate(3);
    diffs.join(", ")
}

/// The parts of a (merged) result in one or two lines for the human summary: which shards
/// of which run, and how far apart they started. None for a run on its own.
pub fn shards_text(r: &RunResult) -> Option<String> {
    let parts = &r.shards;
    if parts.len() <= 1 && parts.iter().all(|s| s.count <= 1) {
        return None;
    }
    let mut runs: BTreeMap<&str, (u64, Vec<u64>)> = BTreeMap::new();
    for s in parts {
        let e = runs.entry(&s.run_id).or_insert((s.count, Vec::new()));
        e.1.push(s.index);
    }
    let what: Vec<String> = runs
        .iter()
        .map(|(id, (count, idx))| format!("{} of {count} of run {id}", idx.len()))
        .collect();
    let mut line = format!("shards: {}", what.join("; "));
    let skews: Vec<(f64, u64)> = parts
        .iter()
        .filter_map(|s| s.start_skew_s.map(|k| (k, s.index)))
        .collect();
    if let (Some(lo), Some(hi)) = (
        skews.iter().min_by(|a, b| a.0.total_cmp(&b.0)),
        skews.iter().max_by(|a, b| a.0.total_cmp(&b.0)),
    ) {
        line.push_str(&format!(
            "; start skew {} (shard {}) to {} (shard {}), spread {}",
            seconds(lo.0),
            lo.1,
            seconds(hi.0),
            hi.1,
            seconds(hi.0 - lo.0)
        ));
    }
    let late: Vec<u64> = parts.iter().filter(|s| s.late).map(|s| s.index).collect();
    if !late.is_empty() {
        line.push_str(&format!(
            "\nwarning: shard {} started later than --start-at allows",
            list(&late)
        ));
    }
    Some(line)
}

/// Seconds as "1.234 ms" / "2.5 s", signed.
fn seconds(s: f64) -> String {
    let a = s.abs();
    let sign = if s < 0.0 { "-" } else { "" };
    if a < 1e-3 {
        format!("{sign}{:.0} µs", a * 1e6)
    } else if a < 1.0 {
        format!("{sign}{:.3} ms", a * 1e3)
    } else {
        format!("{sign}{:.3} s", a)
    }
}

/// Reads a wall-clock instant: Unix seconds (`1795000000`, `1795000000.25`) or RFC 3339
/// (`2026-11-23T20:30:00Z`, `2026-11-23T21:30:00.5+01:00`). Returns Unix seconds.
pub fn parse_instant(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        if (0.0..253_402_300_800.0).contains(&v) {
            return Ok(v);
        }
        return Err(format!("{s:?}: not a time (Unix seconds out of range)"));
    }
    rfc3339(t).ok_or_else(|| {
        format!("{s:?}: not a time; use RFC 3339 (2026-11-23T20:30:00Z) or Unix seconds")
    })
}

fn rfc3339(t: &str) -> Option<f64> {
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = t.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 {
        return None;
    }
    // 60: a leap second, read as the next second's start.
    if sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == start {
            return None;
        }
        frac = format!("0.{}", &t[start..i]).parse().ok()?;
    }
    let offset = match &t[i..] {
        "Z" | "z" => 0,
        z if z.len() == 6
            && (z.starts_with('+') || z.starts_with('-'))
            && z.as_bytes()[3] == b':' =>
        {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if z.starts_with('-') {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86400 + h * 3600 + mi * 60 + sec - offset;
    (secs >= 0).then_some(secs as f64 + frac)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic of the
/// well-known civil-calendar algorithm: 400-year eras of 146097 days, years from March).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Unix seconds as RFC 3339 UTC, whole seconds (`2026-11-23T20:30:00Z`), or with
/// milliseconds when the instant has a fraction.
pub fn format_instant(unix_s: f64) -> String {
    let ms = (unix_s.max(0.0) * 1000.0).round() as i64;
    let (secs, ms) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (y, m, d) = civil_from_days(secs.div_euclid(86400));
    let r = secs.rem_euclid(86400);
    let base = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        r / 3600,
        r / 60 % 60,
        r % 60
    );
    if ms == 0 {
        format!("{base}Z")
    } else {
        format!("{base}.{ms:03}Z")
    }
}

/// Unix seconds as `YYYYMMDD-HHMMSS` UTC (whole seconds), for names of directories and jobs.
pub fn format_compact(unix_s: f64) -> String {
    let t = format_instant(unix_s.floor());
    let digits: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
    format!("{}-{}", &digits[..8], &digits[8..14])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(run: &str, index: u64, count: u64) -> RunResult {
        RunResult {
            shards: vec![ShardInfo {
                run_id: run.into(),
                index,
                count,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn parts(rs: &[RunResult]) -> Vec<Part<'_>> {
        rs.iter()
            .enumerate()
            .map(|(i, r)| Part {
                label: format!("f{i}"),
                result: r,
            })
            .collect()
    }

    #[test]
    fn every_shard_once_is_a_whole_run() {
        let rs = [part("x", 2, 3), part("x", 0, 3), part("x", 1, 3)];
        let got = check_parts(&parts(&rs), false, false).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].present, vec![0, 1, 2]);
        assert!(got[0].missing.is_empty());
    }

    #[test]
    fn a_missing_shard_is_refused_unless_partial_is_allowed() {
        let rs = [part("x", 0, 4), part("x", 3, 4)];
        let e = check_parts(&parts(&rs), false, false).unwrap_err();
        assert!(e.contains("2 of 4 shards missing (shard 1, 2)"), "{e}");
        let got = check_parts(&parts(&rs), false, true).unwrap();
        assert_eq!(got[0].missing, vec![1, 2]);
    }

    #[test]
    fn a_part_twice_is_refused() {
        let rs = [part("x", 0, 2), part("x", 1, 2), part("x", 1, 2)];
        let e = check_parts(&parts(&rs), false, true).unwrap_err();
        assert!(e.contains("shard 1 of 2 appears twice (f1 and f2)"), "{e}");
        // The same run on its own, merged with itself.
        let rs = [part("solo", 0, 1), part("solo", 0, 1)];
        assert!(check_parts(&parts(&rs), false, false).is_err());
        // Results from before parts were recorded: the same document twice.
        let old = RunResult::default();
        let rs = [old.clone(), old];
        let e = check_parts(&parts(&rs), false, false).unwrap_err();
        assert!(e.contains("same result"), "{e}");
    }

    #[test]
    fn counts_that_disagree_or_indices_out_of_range_are_refused() {
        let rs = [part("x", 0, 2), part("x", 1, 3)];
        assert!(check_parts(&parts(&rs), false, true)
            .unwrap_err()
            .contains("says 2 shards"));
        let rs = [part("x", 5, 2)];
        assert!(check_parts(&parts(&rs), false, true)
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn different_configurations_are_refused_unless_mixed() {
        let mut a = part("a", 0, 1);
        let mut b = part("b", 0, 1);
        a.config.protocol = "h1".into();
        b.config.protocol = "h3".into();
        let rs = [a, b];
        let e = check_parts(&parts(&rs), false, false).unwrap_err();
        assert!(e.contains("protocol \"h1\" vs \"h3\""), "{e}");
        assert_eq!(check_parts(&parts(&rs), true, false).unwrap().len(), 2);
    }

    /// Interval i of each part must be the same seconds: different widths are refused, with
    /// or without --mixed; a part without a series (0) goes with any.
    #[test]
    fn parts_of_different_interval_widths_are_refused() {
        let mut a = part("x", 0, 3);
        let mut b = part("x", 1, 3);
        let mut c = part("x", 2, 3);
        a.interval_s = 1.0;
        b.interval_s = 0.5;
        let rs = [a.clone(), b.clone(), c.clone()];
        for mixed in [false, true] {
            let e = check_parts(&parts(&rs), mixed, false).unwrap_err();
            assert!(e.contains("different intervals (1 s vs 0.5 s)"), "{e}");
            assert!(e.contains("f0 and f1"), "{e}");
        }
        b.interval_s = 1.0;
        c.interval_s = 0.0;
        let rs = [a, b, c];
        assert!(check_parts(&parts(&rs), false, false).is_ok());
    }

    #[test]
    fn merged_parts_merge_again_under_the_same_check() {
        let mut ab = part("x", 0, 3);
        ab.merge(&part("x", 1, 3));
        assert_eq!(ab.shards.len(), 2);
        let rs = [ab.clone(), part("x", 2, 3)];
        assert!(check_parts(&parts(&rs), false, false).is_ok());
        let rs = [ab, part("x", 1, 3)];
        assert!(check_parts(&parts(&rs), false, true).is_err());
    }

    #[test]
    fn the_summary_names_the_parts_and_their_skew() {
        let mut r = part("x", 0, 2);
        r.shards[0].start_skew_s = Some(0.0004);
        let mut b = part("x", 1, 2);
        b.shards[0].start_skew_s = Some(0.0021);
        b.shards[0].late = true;
        r.merge(&b);
        let t = shards_text(&r).unwrap();
        assert!(t.contains("2 of 2 of run x"), "{t}");
        assert!(t.contains("400 µs (shard 0) to 2.100 ms (shard 1)"), "{t}");
        assert!(t.contains("warning: shard 1 started later"), "{t}");
        assert!(shards_text(&part("solo", 0, 1)).is_none());
    }

    #[test]
    fn instants_read_and_write_rfc3339_and_unix_seconds() {
        assert_eq!(parse_instant("0").unwrap(), 0.0);
        assert_eq!(parse_instant("1795000000.5").unwrap(), 1_795_000_000.5);
        assert_eq!(parse_instant("1970-01-01T00:00:00Z").unwrap(), 0.0);
        assert_eq!(
            parse_instant("2000-03-01T00:00:00Z").unwrap(),
            951_868_800.0
        );
        assert_eq!(
            parse_instant("2026-11-23T21:30:00.25+01:00").unwrap(),
            parse_instant("2026-11-23T20:30:00.25Z").unwrap()
        );
        assert_eq!(
            parse_instant("2024-02-29T12:00:00-05:30").unwrap(),
            1_709_227_800.0
        );
        for bad in [
            "",
            "soon",
            "2026-02-30T00:00:00Z",
            "2026-11-23T25:00:00Z",
            "2026-11-23T20:30:00",
            "2026-11-23T20:30:00.Z",
            "-5",
            "1e300",
            // Found by fuzzing: non-ASCII where the offset's ':' would be.
            "2024-02-29 23:29:60-\u{FFFD}50",
        ] {
            assert!(parse_instant(bad).is_err(), "{bad:?} was accepted");
        }
        for t in [0.0, 951_868_800.0, 1_709_227_800.0, 1_795_000_000.5, 4e9] {
            assert_eq!(parse_instant(&format_instant(t)).unwrap(), t, "{t}");
        }
        assert_eq!(format_instant(1_709_227_800.0), "2024-02-29T17:30:00Z");
        assert_eq!(format_instant(0.123), "1970-01-01T00:00:00.123Z");
        assert_eq!(format_compact(1_709_227_800.9), "20240229-173000");
    }
}
