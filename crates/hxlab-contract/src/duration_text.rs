//! Durations in the configs' JSON as text with a unit: written exactly (`"250ms"`,
//! `"1500us"`), read in any form `hxlab load`'s flags take (`"1.5s"`, or a bare number of
//! seconds). Use as `#[serde(with = "duration_text")]`, or `duration_text::optional` for an
//! `Option<Duration>`. (Congestion controllers are their names through their own serde.)
//! With the `schema` feature such a field also names its JSON Schema:
//! `#[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]`, or
//! `NullableDurationText` beside `optional` (schemars reads serde's `with` as a type).

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// `d` exactly, in the largest unit that divides it.
pub fn text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Reads what [`text`] writes, a bare number of seconds, or any form of
/// [`hxlab_core::parse_duration`].
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    // The exact forms `text` writes, read back without floating point.
    for (unit, per) in [
        ("ns", 1u64),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ] {
        if let Some(n) = t.strip_suffix(unit).and_then(|n| n.parse::<u64>().ok()) {
            return n
                .checked_mul(per)
                .map(Duration::from_nanos)
                .ok_or_else(|| format!("duration {s:?} is too long"));
        }
    }
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && (0.0..366.0 * 86400.0).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!("duration {s:?}: not a valid number of seconds"));
    }
    hxlab_core::parse_duration(t).map_err(|e| e.to_string())
}

/// Writes `d` as [`text`] does (serde's `with` hook).
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&text(*d))
}

/// Reads a duration as [`parse`] does (serde's `with` hook).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

/// The same for an `Option<Duration>`, None written and read as null.
pub mod optional {
    use super::*;

    /// Writes `Some(d)` as [`text`] does, None as null.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&text(*d)),
            None => s.serialize_none(),
        }
    }

    /// Reads null as None, else a duration as [`parse`] does.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The JSON Schema of a duration as text: what [`parse`] reads in the forms the docs give (a
/// number with a unit, `"250ms"`, `"1.5s"`, or a bare number of seconds). Named in
/// `#[schemars(with = "duration_text::DurationText")]` beside `#[serde(with = "duration_text")]`.
#[cfg(feature = "schema")]
pub struct DurationText;

#[cfg(feature = "schema")]
impl schemars::JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DurationText".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration: a number with a unit (ns, us, µs, ms, s, sec, m, min, h), or a bare number of seconds.",
            "type": "string",
            "pattern": r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|sec|m|min|h)?$",
        })
    }
}

/// [`DurationText`] or null, for `#[serde(with = "duration_text::optional")]`. A field of it
/// is required unless serde has a default for it: serde's `with` reads a missing key as an
/// error, not as None.
#[cfg(feature = "schema")]
pub struct NullableDurationText;

#[cfg(feature = "schema")]
impl schemars::JsonSchema for NullableDurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NullableDurationText".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let text = generator.subschema_for::<DurationText>();
        schemars::json_schema!({ "anyOf": [text, { "type": "null" }] })
    }
}
