//! JSON Schemas (schemars, the `schema` feature) of the vocabulary whose serde form is written
//! by hand: a congestion controller and a scheduler by name, a low-water mark as `off` or a
//! size, a histogram as HdrHistogram V2 in base64. Each says what its `Deserialize` accepts
//! in the form its `Serialize` writes, so a strict schema of a type that holds one (the
//! derived ones: `RunResult`, the configs of hxlab-contract) refuses what hxlab refuses.
//! Where a parser is lenient (any case), the schema keeps to the written form.

use crate::cc::CongestionControl;
use crate::histogram::LatencyHistogram;
use crate::sched::{Lowat, Scheduler};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

/// A byte size as [`crate::parse_size`] reads it: a number and an optional unit (`100`,
/// `5k`, `10KiB`, `1.5MB`).
pub const SIZE_PATTERN: &str = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(B|b|k|K|kB|KB|Ki|KiB|M|MB|m|Mi|MiB|G|GB|g|Gi|GiB|T|TB|Ti|TiB)?$";

/// The names `cc` takes in JSON and TOML.
impl JsonSchema for CongestionControl {
    fn schema_name() -> Cow<'static, str> {
        "CongestionControl".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut names: Vec<&str> = CongestionControl::ALL.iter().map(|c| c.name()).collect();
        names.push("newreno");
        json_schema!({
            "description": "A congestion controller by name (`newreno` reads as `reno`).",
            "type": "string",
            "enum": names,
        })
    }
}

/// The names `scheduler` takes.
impl JsonSchema for Scheduler {
    fn schema_name() -> Cow<'static, str> {
        "Scheduler".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Scheduler::ALL.iter().map(|s| s.name()).collect();
        json_schema!({
            "description": "How responses share an HTTP/2 or HTTP/3 connection.",
            "type": "string",
            "enum": names,
        })
    }
}

/// `off`, or a size in bytes as a number or as text (written as text: `"16384"`).
impl JsonSchema for Lowat {
    fn schema_name() -> Cow<'static, str> {
        "Lowat".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "TCP_NOTSENT_LOWAT: `off`, or 1 byte to 2 GiB as a number or a size (`\"16KiB\"`, `\"16384\"`).",
            "anyOf": [
                { "type": "integer", "minimum": 1, "maximum": i32::MAX },
                { "type": "string", "enum": ["off"] },
                { "type": "string", "pattern": SIZE_PATTERN },
            ],
        })
    }
}

/// An HdrHistogram V2 encoding (uncompressed, 40-byte header at least) in standard base64.
impl JsonSchema for LatencyHistogram {
    fn schema_name() -> Cow<'static, str> {
        "LatencyHistogram".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Microseconds, as an HdrHistogram V2 (uncompressed) encoding in standard base64.",
            "type": "string",
            "contentEncoding": "base64",
            "minLength": 56,
            "pattern": "^HISTE[A-Za-z0-9+/]*={0,2}$",
        })
    }
}
