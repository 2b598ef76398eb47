//! The JSON Schemas of hxlab's contracts (the `schema` feature; `hxlab schema` writes them to
//! docs/schema/): `RunResult`, every config a child takes on `--config`, and what the
//! children say back. Each is generated from its type (schemars) and made strict: every
//! object refuses properties it does not name (`additionalProperties: false`), whether or
//! not serde refuses them, and names as `required` every field serde cannot do without.

use hxlab_core::page::PageRun;
use schemars::transform::{transform_subschemas, Transform};
use schemars::{generate::SchemaSettings, json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value};
use std::borrow::Cow;

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
        name: "page-report",
        what: "`hxlab page --json`",
        schema: strict_schema_for::<crate::PageReport>,
    },
    Contract {
        name: "probe-report",
        what: "`hxlab probe --json` (with `--priorities`, its scorecards)",
        schema: strict_schema_for::<crate::ProbeReport>,
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

/// A run of `hxlab page --json`, as [`PageRunEntry`](crate::PageRunEntry)'s serde writes it:
/// a measured run — the [`PageRun`]'s own keys with `run`, `counted` and, with `--replay`,
/// `replay` (its repeat view says `counted` too) — or a failed one, `{run, counted, error}`
/// (and `replay`). Reading needs `run`, and `error` for a failed run; `counted` follows from
/// the run, so it is written and not read.
impl JsonSchema for crate::PageRunEntry {
    fn schema_name() -> Cow<'static, str> {
        "PageRunEntry".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let run =
            json!({ "description": "The run's number, from 1.", "type": "integer", "minimum": 0 });
        let counted = json!({
            "description": "Whether the run counts in the summary: it measured, and nothing flagged it.",
            "type": "boolean",
        });
        let replay = generator
            .subschema_for::<Option<crate::ReplayCounts>>()
            .to_value();
        let page_run = definition_of::<PageRun>(generator);
        let mut repeat_view = page_run.clone();
        add_property(&mut repeat_view, "counted", &counted, false);
        generator
            .definitions_mut()
            .insert("PageRunRepeatView".into(), repeat_view);
        let mut measured = page_run;
        add_property(&mut measured, "run", &run, true);
        add_property(&mut measured, "counted", &counted, false);
        add_property(&mut measured, "replay", &replay, false);
        let view =
            json!({ "anyOf": [{ "$ref": "#/$defs/PageRunRepeatView" }, { "type": "null" }] });
        add_property(&mut measured, "repeat_view", &view, false);
        let failed = json!({
            "type": "object",
            "properties": {
                "run": run,
                "counted": { "description": "A failed run never counts.", "const": false },
                "error": { "description": "Why the run has no figures.", "type": "string" },
                "replay": replay,
            },
            "required": ["run", "error"],
        });
        json_schema!({
            "description": "One run: its figures, or why there are none.",
            "oneOf": [measured, failed],
        })
    }
}

/// The definition `T`'s schema refers to (registered in `generator` on the way).
fn definition_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    let reference = generator.subschema_for::<T>();
    let name = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_default()
        .to_string();
    generator
        .definitions()
        .get(&name)
        .cloned()
        .unwrap_or_else(|| reference.to_value())
}

/// Sets property `name` of the object schema `object` to `schema`, and lists it as
/// required when `required`.
fn add_property(object: &mut Value, name: &str, schema: &Value, required: bool) {
    object["properties"][name] = schema.clone();
    if required {
        match object["required"].as_array_mut() {
            Some(list) => list.push(name.into()),
            None => object["required"] = json!([name]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Objects that name their properties are closed, at the top and in `$defs`; a map
    /// (`by_protocol`) stays open to any key, its values typed.
    #[test]
    fn strict_closes_every_object_and_leaves_maps_open() {
        let s = strict_schema_for::<crate::StatsSnapshot>().to_value();
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["$defs"]["ProtoStats"]["additionalProperties"], false);
        assert_eq!(s["$defs"]["H3QpackStats"]["additionalProperties"], false);
        let map = &s["properties"]["by_protocol"];
        assert_eq!(map["type"], "object");
        assert_eq!(map["additionalProperties"]["$ref"], "#/$defs/ProtoStats");
    }

    /// Every contract has a name of its own, and the same schema however often it is made:
    /// nothing of this machine (`ServeConfig::threads` defaults to its CPU count) is in it.
    #[test]
    fn contracts_are_named_once_and_generate_the_same_everywhere() {
        let mut names: Vec<&str> = CONTRACTS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CONTRACTS.len());
        for c in CONTRACTS {
            assert_eq!(c.text(), c.text(), "{}", c.name);
        }
        let serve = strict_schema_for::<crate::ServeConfig>().to_value();
        let threads = &serve["properties"]["threads"];
        assert!(threads.get("default").is_none(), "{threads}");
        assert!(threads["description"]
            .as_str()
            .is_some_and(|d| d.ends_with("Default: the CPUs this process may use.")));
        assert_eq!(serve["properties"]["max_streams"]["default"], 100);
    }
}
