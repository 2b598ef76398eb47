//! The JSON Schemas of hxlab's contracts (the `schema` feature; `hxlab schema` writes them to
//! docs/schema/): `RunResult`, every config a child takes on `--config`, and what the
//! children say back. Each is generated from its type (schemars) and made strict: every
//! object refuses properties it does not name (`additionalProperties: false`), whether or
//! not serde refuses them, and names as `required` every field serde cannot do without.

use schemars::transform::{transform_subschemas, Transform};
use schemars::{generate::SchemaSettings, JsonSchema, Schema};

/// One document hxlab writes or reads, and its schema.
pub struct Contract {
    /// The file's stem in docs/schema/ (`run-result` → `run-result.schema.json`), also the
    /// name `hxlab schema NAME` takes.
    pub name: &'static str,
    /// What the document is, in a few words (`hxlab schema --list`, docs/schema.md).
    pub what: &'static str,
    /// Its strict schema.
    pub schema: fn() -> Schema,
}

impl Contract {
    /// The file name in docs/schema/.
    pub fn file_name(&self) -> String {
        format!("{}.schema.json", self.name)
    }

    /// The schema as the file holds it: pretty JSON with a final newline.
    pub fn text(&self) -> String {
        // A Schema is a JSON value, which always serialises.
        serde_json::to_string_pretty(&(self.schema)()).unwrap_or_default() + "\n"
    }
}

/// Every contract this crate types, in the order docs/schema.md lists them: the result and
/// the four configs first.
pub const CONTRACTS: &[Contract] = &[
    Contract {
        name: "run-result",
        what: "`hxlab load --json` (one load run, a line of results.jsonl's `result`)",
        schema: strict_schema_for::<hxlab_core::RunResult>,
    },
    Contract {
        name: "load-config",
        what: "`hxlab load --config`",
        schema: strict_schema_for::<crate::LoadConfig>,
    },
    Contract {
        name: "serve-config",
        what: "`hxlab serve --config`",
        schema: strict_schema_for::<crate::ServeConfig>,
    },
    Contract {
        name: "page-job",
        what: "`hxlab page --config`",
        schema: strict_schema_for::<crate::PageJob>,
    },
    Contract {
        name: "link-config",
        what: "`hxlab link --config`",
        schema: strict_schema_for::<hxlab_link::LinkConfig>,
    },
    Contract {
        name: "load-job",
        what: "a line `hxlab load --jobs` reads (the lab, inside a link)",
        schema: strict_schema_for::<crate::LoadJob>,
    },
    Contract {
        name: "job-done",
        what: "a line `hxlab load --jobs` answers",
        schema: strict_schema_for::<crate::JobDone>,
    },
    Contract {
        name: "ready-file",
        what: "`hxlab serve --ready-file`",
        schema: strict_schema_for::<crate::ReadyFile>,
    },
    Contract {
        name: "stats",
        what: "`hxlab serve`'s `GET /stats`",
        schema: strict_schema_for::<crate::StatsSnapshot>,
    },
    Contract {
        name: "replay-stats",
        what: "`hxlab serve --replay`'s `GET /replay-stats`",
        schema: strict_schema_for::<crate::ReplayCounts>,
    },
    Contract {
        name: "link-stats",
        what: "`hxlab link --stats`",
        schema: strict_schema_for::<crate::LinkStatsFile>,
    },
];

/// The strict schema of `T` (JSON Schema 2020-12): schemars' own, with every object that
/// names its properties closed to others ([`Strict`]).
pub fn strict_schema_for<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .with_transform(Strict)
        .into_generator()
        .into_root_schema_for::<T>()
}

/// Closes every object schema that lists `properties` and says nothing of others
/// (`additionalProperties: false`), at every depth. Maps (`additionalProperties` a schema,
/// no `properties`) are left as they are.
#[derive(Clone, Copy, Debug)]
pub struct Strict;

impl Transform for Strict {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            if object.contains_key("properties") && !object.contains_key("additionalProperties") {
                object.insert("additionalProperties".into(), false.into());
            }
        }
        transform_subschemas(self, schema);
    }
}

/// For a field whose default is this machine's CPU count (`ServeConfig::threads`): the
/// schema says so instead of carrying the number of the machine that generated it, so the
/// committed files are the same wherever they are generated.
pub fn default_is_the_cpu_count(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("default");
        let said = object
            .get("description")
            .and_then(|d| d.as_str())
            .unwrap_or_default()
            .to_string();
        let with_default = format!("{said} Default: the CPUs this process may use.");
        object.insert("description".into(), with_default.trim_start().into());
    }
}
