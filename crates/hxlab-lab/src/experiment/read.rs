//! Reading what an experiment file writes: one factor's values, typed and checked, and the
//! settings' shapes; with positions as line:column.

use super::{Ctx, FactorSpec, Level, Place, Protocol, SpecError, FACTORS, SETTINGS};
use crate::profiles;
use hxlab_core::sched::{Lowat, Scheduler};
use hxlab_core::{parse_duration, parse_size};
use std::time::Duration;
use toml::Spanned;

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..src.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

pub(super) fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// Reads one value of a factor, or says what was expected.
pub(super) fn read_level(factor: &str, v: &toml::Value) -> Result<(String, Level), String> {
    let expected = FACTORS
        .iter()
        .find(|(n, _)| *n == factor)
        .map(|(_, e)| *e)
        .unwrap_or("a value");
    let wrong = || format!("{factor}: expected {expected}, found {}", type_name(v));
    match factor {
        "origin" => {
            let s = v.as_str().ok_or_else(wrong)?;
            super::origins::check_name(s)?;
            Ok((s.to_string(), Level::Text(s.to_string())))
        }
        "protocol" => {
            let s = v.as_str().ok_or_else(wrong)?;
            match Protocol::parse(s) {
                Some(p) => Ok((p.name().to_string(), Level::Text(p.name().to_string()))),
                None if s.starts_with("h3") => Err(format!(
                    "protocol {s:?}: HTTP/3 always runs over QUIC with TLS 1.3; there is no h3 without TLS (use \"h3\")"
                )),
                None => Err(format!("unknown protocol {s:?}; expected {expected}")),
            }
        }
        "profile" => {
            let s = v.as_str().ok_or_else(wrong)?;
            if s.eq_ignore_ascii_case("none") {
                return Ok(("none".into(), Level::Text("none".into())));
            }
            match profiles::check(s) {
                Ok(()) => Ok((s.to_string(), Level::Text(s.to_string()))),
                Err(e) => Err(format!("profile: {e}; or \"none\" for no emulation")),
            }
        }
        "loss" => {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(0) => "0%".into(),
                _ => return Err(wrong()),
            };
            check_loss(&s)?;
            Ok((s.clone(), Level::Text(s)))
        }
        "cc" | "cc_server" | "cc_client" => {
            let s = v.as_str().ok_or_else(wrong)?;
            if ["reno", "cubic", "bbr", "default"].contains(&s) {
                Ok((s.to_string(), Level::Text(s.to_string())))
            } else {
                Err(format!(
                    "unknown congestion control {s:?}; expected {expected}"
                ))
            }
        }
        "browser" => {
            let s = v.as_str().ok_or_else(wrong)?;
            let e = s.parse::<hxlab_core::page::Engine>()?;
            Ok((e.name().to_string(), Level::Text(e.name().to_string())))
        }
        "discovery" => {
            let s = v.as_str().ok_or_else(wrong)?;
            match hxlab_contract::Discovery::parse(s) {
                Some(d) => Ok((d.name().to_string(), Level::Text(d.name().to_string()))),
                None => Err(format!("unknown discovery {s:?}; expected {expected}")),
            }
        }
        "scheduler" => {
            let s = v.as_str().ok_or_else(wrong)?;
            let sched = Scheduler::parse(s)?;
            Ok((
                sched.name().to_string(),
                Level::Text(sched.name().to_string()),
            ))
        }
        "header_table" => read_header_table(v, wrong),
        "notsent_lowat" => {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                _ => return Err(wrong()),
            };
            match Lowat::parse(&s).map_err(|e| format!("notsent_lowat {e}"))? {
                Lowat::Off => Ok(("off".into(), Level::Text("off".into()))),
                Lowat::Bytes(n) => Ok((s, Level::Bytes(u64::from(n)))),
            }
        }
        "rtt" | "jitter" => {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(0) => "0ms".into(),
                _ => return Err(wrong()),
            };
            let d = hxlab_link::config::parse_delay(factor, &s).map_err(|e| e.to_string())?;
            Ok((s, Level::Time(d)))
        }
        "down" | "up" => {
            let s = v.as_str().ok_or_else(wrong)?;
            hxlab_link::config::parse_link_rate(factor, s).map_err(|e| e.to_string())?;
            Ok((s.to_string(), Level::Text(s.to_string())))
        }
        "queue" => {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                _ => return Err(wrong()),
            };
            hxlab_link::config::parse_queue(&s).map_err(|e| e.to_string())?;
            Ok((s.clone(), Level::Text(s)))
        }
        "delay" | "duration" => read_time(factor, v, wrong),
        "size" => read_size(v, wrong),
        "resources" | "clients" | "streams" | "requests" => read_count(factor, v, expected, wrong),
        "push" | "keepalive" | "tls_resume" | "zero_rtt" | "repeat_view" => {
            let b = v.as_bool().ok_or_else(wrong)?;
            Ok((if b { "on" } else { "off" }.to_string(), Level::Flag(b)))
        }
        _ => Err(format!("unknown factor {factor:?}")),
    }
}

/// `delay` or `duration`: a duration with a unit (the server's delay in whole ms, ≤ 60 s).
fn read_time(
    factor: &str,
    v: &toml::Value,
    wrong: impl Fn() -> String,
) -> Result<(String, Level), String> {
    let s = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(0) => "0ms".into(),
        toml::Value::Integer(_) => {
            return Err(format!(
                "{factor}: a duration needs a unit, e.g. \"{}ms\"",
                v.as_integer().unwrap_or(0)
            ))
        }
        _ => return Err(wrong()),
    };
    let d = parse_duration(&s).map_err(|e| format!("{factor}: {e}"))?;
    if factor == "delay" && d.as_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "delay {s:?}: the server's delay is in whole milliseconds"
        ));
    }
    if factor == "delay" && d > Duration::from_secs(60) {
        return Err(format!("delay {s:?}: at most 60s"));
    }
    if factor == "duration" && d.is_zero() {
        return Err("duration: must be more than zero".into());
    }
    Ok((s, Level::Time(d)))
}

/// `header_table`: bytes, as a count or with a unit, at most 64 KiB (0: static table only).
fn read_header_table(
    v: &toml::Value,
    wrong: impl Fn() -> String,
) -> Result<(String, Level), String> {
    let (s, bytes) = match v {
        toml::Value::String(s) => (
            s.clone(),
            parse_size(s).map_err(|e| format!("header_table: {e}"))?,
        ),
        toml::Value::Integer(n) if *n >= 0 => (n.to_string(), *n as u64),
        _ => return Err(wrong()),
    };
    hxlab_core::header_table::check_header_table("header_table", bytes)?;
    Ok((s, Level::Bytes(bytes)))
}

/// `size`: bytes, as a count or with a unit, at most 1 GiB.
fn read_size(v: &toml::Value, wrong: impl Fn() -> String) -> Result<(String, Level), String> {
    let (s, bytes) = match v {
        toml::Value::String(s) => (s.clone(), parse_size(s).map_err(|e| format!("size: {e}"))?),
        toml::Value::Integer(n) if *n >= 0 => (n.to_string(), *n as u64),
        _ => return Err(wrong()),
    };
    if bytes > 1 << 30 {
        return Err(format!("size {s:?}: at most 1GiB per response"));
    }
    Ok((s, Level::Bytes(bytes)))
}

/// `resources`, `clients`, `streams`, `requests`: a positive count within what load takes.
fn read_count(
    factor: &str,
    v: &toml::Value,
    expected: &str,
    wrong: impl Fn() -> String,
) -> Result<(String, Level), String> {
    let n = v.as_integer().ok_or_else(wrong)?;
    if n < 1 {
        return Err(format!("{factor}: expected {expected}, found {n}"));
    }
    // clients and streams: what `hxlab load` accepts for -c and -m, so a cell that
    // passes here does not fail when it runs.
    let max: i64 = match factor {
        "clients" => 65_536,
        "streams" => 1 << 20,
        _ => 10_000_000,
    };
    if n > max {
        return Err(format!("{factor}: {n} is more than {max}"));
    }
    Ok((n.to_string(), Level::Count(n as u64)))
}

/// Accepts `0`, `1%`, `0.5%` and `ge:P,R,H,K` (four percentages, netem's gemodel).
pub(super) fn check_loss(s: &str) -> Result<(), String> {
    let pct = |t: &str| -> Result<f64, String> {
        let t = t.trim().trim_end_matches('%');
        let x: f64 = t
            .parse()
            .map_err(|_| format!("loss {s:?}: {t:?} is not a number"))?;
        if !(0.0..=100.0).contains(&x) {
            return Err(format!(
                "loss {s:?}: {x} is not a percentage between 0 and 100"
            ));
        }
        Ok(x)
    };
    if let Some(rest) = s.strip_prefix("ge:") {
        let parts: Vec<&str> = rest.split(',').collect();
        if parts.len() != 4 {
            return Err(format!(
                "loss {s:?}: a Gilbert-Elliott model has four values, ge:P,R,H,K"
            ));
        }
        for p in parts {
            pct(p)?;
        }
        Ok(())
    } else if s.ends_with('%') || s.trim() == "0" {
        pct(s).map(|_| ())
    } else {
        Err(format!(
            "loss {s:?}: expected a percentage like \"1%\" or \"ge:P,R,H,K\""
        ))
    }
}

pub(super) fn read_factor(
    ctx: &Ctx,
    name: &str,
    value: &Spanned<toml::Value>,
) -> Result<FactorSpec, SpecError> {
    let place = Place::File(value.span());
    let levels = match value.get_ref() {
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err(ctx.at(
                    &place,
                    format!("{name}: an empty list sweeps nothing; give at least one value"),
                ));
            }
            items
                .iter()
                .map(|v| read_level(name, v))
                .collect::<Result<Vec<_>, _>>()
        }
        v => read_level(name, v).map(|l| vec![l]),
    }
    .map_err(|m| ctx.at(&place, m))?;
    check_duplicates(name, &levels).map_err(|m| ctx.at(&place, m))?;
    Ok(FactorSpec {
        levels,
        span: place,
    })
}

pub(super) fn check_duplicates(name: &str, levels: &[(String, Level)]) -> Result<(), String> {
    for (i, (a, la)) in levels.iter().enumerate() {
        if levels[..i].iter().any(|(_, lb)| lb == la) {
            return Err(format!("{name}: {a:?} is listed twice"));
        }
    }
    Ok(())
}

pub(super) fn str_setting(
    ctx: &Ctx,
    key: &str,
    v: &Spanned<toml::Value>,
) -> Result<String, SpecError> {
    v.get_ref().as_str().map(str::to_string).ok_or_else(|| {
        ctx.at(
            &Place::File(v.span()),
            format!("{key}: expected a string, found {}", type_name(v.get_ref())),
        )
    })
}

pub(super) fn duration_setting(
    ctx: &Ctx,
    key: &str,
    v: &Spanned<toml::Value>,
) -> Result<Duration, SpecError> {
    let s = str_setting(ctx, key, v)?;
    parse_duration(&s).map_err(|e| ctx.at(&Place::File(v.span()), format!("{key}: {e}")))
}

pub(super) fn unknown_key(key: &str) -> String {
    let factors: Vec<&str> = FACTORS.iter().map(|(n, _)| *n).collect();
    let hint = match key {
        "protocols" | "proto" => " (did you mean `protocol`?)",
        "delays" => " (did you mean `delay`?)",
        "sizes" => " (did you mean `size`?)",
        "profiles" | "network" => " (did you mean `profile`?)",
        "reps" | "repeat" => " (did you mean `repetitions`?)",
        "warmup" | "warm-up" => " (did you mean `warm_up`?)",
        _ => "",
    };
    format!(
        "unknown key `{key}`{hint}; expected a factor ({}) or a setting ({})",
        factors.join(", "),
        SETTINGS.join(", ")
    )
}

/// `har = "PATH"` (relative to the experiment file, read and checked now) or
/// `url = "http(s)://..."`.
pub(super) fn page_source(
    ctx: &Ctx,
    key: &str,
    value: &str,
    place: &Place,
) -> Result<super::PageSource, SpecError> {
    if key == "url" {
        let ok = (value.starts_with("https://") || value.starts_with("http://"))
            && hxlab_core::har::split_url(value).is_some();
        if !ok {
            return Err(ctx.at(
                place,
                format!("url {value:?}: expected an http:// or https:// URL"),
            ));
        }
        return Ok(super::PageSource::Url(value.to_string()));
    }
    let path = std::path::Path::new(value);
    let path = if path.is_relative() {
        std::path::Path::new(ctx.file)
            .parent()
            .map_or(path.to_path_buf(), |d| d.join(path))
    } else {
        path.to_path_buf()
    };
    let archive = hxlab_core::har::Archive::read(&path)
        .map_err(|e| ctx.at(place, format!("har {}: {}", path.display(), e.0)))?;
    let start = hxlab_core::har::RecordedStart::of(&archive);
    Ok(super::PageSource::Har(path, start))
}
