//! RFC 9218 priority signals: `hxlab_wire::priority` — the `priority` field's Structured
//! Field dictionary parser, several lines folded, and the HTTP/2 and HTTP/3 PRIORITY_UPDATE
//! payloads — as the origin's HTTP/2 and HTTP/3 servers read them from any client.
//!
//! Input: any bytes, split at the first byte's position into field lines. Checks: no panic;
//! a priority read is always within RFC 9218's range (urgency 0–7); a value that parses
//! parses the same whatever priority it is applied on top of, for the members it carries;
//! updates round-trip through their writers.
#![no_main]
use hxlab_wire::priority::{h2_update, h3_update, write_h2_update, write_h3_update, Field, Priority};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let at = (split as usize).min(rest.len());
    let (a, b) = rest.split_at(at);
    let mut f = Field::default();
    f.add_line(a);
    f.add_line(b);
    if let Some(p) = f.priority() {
        assert!(p.urgency <= 7);
    }
    if let Some(p) = Priority::from_field(rest) {
        assert!(p.urgency <= 7);
        let other = Priority {
            urgency: 7 - p.urgency,
            incremental: !p.incremental,
        }
        .with_field(rest);
        assert!(other.is_some(), "validity does not depend on the base");
    }
    let mut out = Vec::new();
    let id = u32::from_be_bytes([data[0], 0, 0, 1]) & 0x7fff_ffff;
    write_h2_update(&mut out, id, rest);
    assert_eq!(h2_update(&out[9..]), Some((id, rest)));
    let _ = h2_update(rest);
    let mut out = Vec::new();
    write_h3_update(&mut out, u64::from(id) * 4, rest);
    let _ = h3_update(rest);
});
