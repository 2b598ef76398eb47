//! How hxlab's origin sent, as it read it back: one line beside the pair lines saying which
//! scheduler and TCP send low-water mark the compared cells ran with, since both change what
//! HTTP/2 and HTTP/3 can do with their streams, and for which protocols neither applies.

use super::{and_list, Kind, Line};
use crate::report::Report;
use hxlab_core::sched::Scheduler;

/// `origin hxlab, read back: scheduler rfc9218 (h1-tls: none, one response at a time per
/// connection); TCP_NOTSENT_LOWAT 16384 (h3: none, no TCP)`. None when no cell was served
/// by hxlab's origin (or its records predate the read-back).
pub(super) fn origin_line(r: &Report) -> Option<Line> {
    let mut schedulers: Vec<String> = Vec::new();
    let mut marks: Vec<String> = Vec::new();
    let mut unscheduled: Vec<&str> = Vec::new();
    let mut no_mark: Vec<&str> = Vec::new();
    let mut cells = 0;
    for c in &r.cells {
        let Some(s) = &c.scheduling else { continue };
        cells += 1;
        let proto = c.factors.get("protocol").map_or("?", String::as_str);
        if !s.scheduler_applies {
            push_new(&mut unscheduled, proto);
        } else {
            let name = s.scheduler.map_or("not said", |x| x.name());
            push_new(&mut schedulers, name.to_string());
        }
        let seen: Vec<&String> = s
            .notsent_lowat
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k)
            .collect();
        if seen.is_empty() && c.values.len() + c.failed > 0 {
            push_new(&mut no_mark, proto);
        }
        for k in seen {
            push_new(&mut marks, k.clone());
        }
    }
    if cells == 0 {
        return None;
    }
    // In the order the docs list them (rfc9218, round-robin, fifo).
    schedulers.sort_by_key(|s| Scheduler::parse(s).ok());
    let one_at_a_time = and_list(&unscheduled);
    let scheduler = match (schedulers.is_empty(), unscheduled.is_empty()) {
        (false, true) => format!("scheduler {}", and_list(&schedulers)),
        (false, false) => format!(
            "scheduler {} ({one_at_a_time}: none, one response at a time per connection)",
            and_list(&schedulers)
        ),
        _ => format!("no scheduler ({one_at_a_time}: one response at a time per connection)"),
    };
    // HTTP/3 has no TCP socket to read a mark from; another protocol without one is odd.
    let why = if no_mark.iter().all(|p| *p == "h3") {
        ", as QUIC has no TCP socket"
    } else {
        ""
    };
    let mark = match (marks.is_empty(), no_mark.is_empty()) {
        (false, true) => format!("TCP_NOTSENT_LOWAT {}", and_list(&marks)),
        (false, false) => format!(
            "TCP_NOTSENT_LOWAT {} ({}: none read back{why})",
            and_list(&marks),
            and_list(&no_mark)
        ),
        _ => format!("no TCP_NOTSENT_LOWAT read back{why}"),
    };
    Some(Line {
        kind: Kind::Info,
        text: format!("origin hxlab, read back: {scheduler}; {mark}"),
        condition: String::new(),
        problem: None,
        count: cells,
        across: Vec::new(),
    })
}

/// Adds `x` to `v` unless it is there.
fn push_new<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}
