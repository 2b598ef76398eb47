//! Experiments described in code rather than read from a file (`hxlab compare --url` and
//! `--page`): the settings a file's top level gives, its URL origins and page as values, and
//! each factor's levels as the values a file would hold. [`Description::build`] expands it by
//! the same rules as [`super::parse`] (the same checks, `--set`/`-r` overrides and cells), so
//! no experiment is written out as TOML text to be read straight back.

use super::origins::{check_base, check_name, check_path, UrlOrigin, BUILTIN};
use super::read::{check_duplicates, page_source, read_level};
use super::{
    apply_overrides, check_expanded, check_workload_factors, expand, Ctx, Experiment, FactorSpec,
    OriginDef, OriginKind, Overrides, Place, Protocol, SpecError, FACTORS,
};
use hxlab_report::{Metric, Workload};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The page of a browser experiment: a recording to replay, or a live URL.
#[derive(Clone, Debug)]
pub enum PageInput {
    /// A HAR archive (`har = "..."` in a file).
    Har(PathBuf),
    /// A URL loaded live (`url = "..."`).
    Url(String),
}

/// One level of a factor, as a file would write it.
#[derive(Clone, Debug, PartialEq)]
pub enum FactorValue {
    Int(i64),
    Text(String),
    Bool(bool),
}

impl FactorValue {
    fn value(&self) -> toml::Value {
        match self {
            FactorValue::Int(n) => toml::Value::Integer(*n),
            FactorValue::Text(s) => toml::Value::String(s.clone()),
            FactorValue::Bool(b) => toml::Value::Boolean(*b),
        }
    }
}

/// A server the lab does not run, reached by URL (an `[origins.NAME]` table with `urls`).
#[derive(Clone, Debug)]
pub struct UrlOriginInput {
    pub name: String,
    /// The protocols it serves, each with its base URL (`http(s)://host[:port][/prefix]`).
    pub urls: BTreeMap<Protocol, String>,
    /// The path of every workload's resource.
    pub path: String,
    /// Accept any certificate.
    pub insecure: bool,
    /// Trust this CA certificate.
    pub cacert: Option<PathBuf>,
}

/// An experiment described in code; see the module's documentation.
#[derive(Clone, Debug)]
pub struct Description {
    pub name: String,
    pub title: String,
    pub description: String,
    pub workload: Workload,
    pub repetitions: u32,
    pub timeout: Duration,
    /// The factor laid out as table columns.
    pub columns: Option<&'static str>,
    pub baseline: Option<Protocol>,
    pub seed: Option<u64>,
    pub page: Option<PageInput>,
    pub metric: Option<Metric>,
    pub origins: Vec<UrlOriginInput>,
    /// Factors in order, each with its levels as a file would give them.
    pub factors: Vec<(&'static str, Vec<FactorValue>)>,
}

impl Description {
    /// The experiment, expanded with `overrides` as a file's would be.
    pub fn build(self, overrides: &Overrides) -> Result<Experiment, SpecError> {
        let label = format!("{} (built in)", self.name);
        let origins = self
            .origins
            .iter()
            .map(|o| url_origin(o).map(|d| (o.name.clone(), d)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map_err(|message| SpecError::Whole {
                file: label.clone(),
                message,
            })?;
        let ctx = Ctx {
            file: &label,
            src: "",
            origins: origins.clone(),
        };
        let mut exp = Experiment {
            name: self.name,
            title: self.title,
            description: self.description,
            workload: self.workload,
            repetitions: self.repetitions,
            warm_up: None,
            timeout: self.timeout,
            columns: self.columns.map(str::to_string),
            baseline: self.baseline.map(|p| p.name().to_string()),
            seed: self.seed,
            factors: Vec::new(),
            cells: Vec::new(),
            published: Vec::new(),
            origins,
            page: None,
            metric: self.metric,
            page_trust: super::PageTrust::default(),
            strict: false,
        };
        exp.page = match &self.page {
            Some(PageInput::Har(p)) => Some(page_source(
                &ctx,
                "har",
                &p.display().to_string(),
                &Place::Option("--har".into()),
            )?),
            Some(PageInput::Url(u)) => {
                Some(page_source(&ctx, "url", u, &Place::Option("--url".into()))?)
            }
            None => None,
        };
        let mut base = BTreeMap::new();
        for (name, values) in &self.factors {
            let place = Place::Option(format!("{name} of {label}"));
            if !FACTORS.iter().any(|(n, _)| n == name) {
                return Err(ctx.at(&place, format!("{name:?} is not a factor")));
            }
            let levels = values
                .iter()
                .map(|v| read_level(name, &v.value()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| ctx.at(&place, m))?;
            check_duplicates(name, &levels).map_err(|m| ctx.at(&place, m))?;
            base.insert(
                name.to_string(),
                FactorSpec {
                    levels,
                    span: place,
                },
            );
        }
        let mut blocks = Vec::new();
        apply_overrides(overrides, &mut exp, &mut base, &mut blocks)?;
        check_workload_factors(&ctx, &exp, &base, &blocks)?;
        expand(&ctx, &mut exp, &base, &blocks)?;
        check_expanded(&ctx, &exp)?;
        Ok(exp)
    }
}

/// A URL origin, checked by the rules of an `[origins.NAME]` table with `urls`.
fn url_origin(o: &UrlOriginInput) -> Result<OriginDef, String> {
    let name = &o.name;
    check_name(name)?;
    if name == BUILTIN {
        return Err(format!("[origins.{BUILTIN}] is the built-in origin"));
    }
    if o.urls.is_empty() {
        return Err(format!("[origins.{name}]: no protocol has a URL"));
    }
    for (p, u) in &o.urls {
        let https =
            check_base(u).map_err(|m| format!("[origins.{name}] urls.{}: {m}", p.name()))?;
        if https != p.tls() {
            return Err(format!(
                "[origins.{name}] urls.{}: the URL's scheme does not match the protocol",
                p.name()
            ));
        }
    }
    check_path(&o.path).map_err(|m| format!("[origins.{name}] path: {m}"))?;
    let paths = [Workload::Resources, Workload::Throughput, Workload::Browser]
        .into_iter()
        .map(|w| (w, o.path.clone()))
        .collect();
    Ok(OriginDef {
        name: name.clone(),
        protocols: o.urls.keys().copied().collect(),
        kind: OriginKind::Url(UrlOrigin {
            urls: o.urls.clone(),
            paths,
            insecure: o.insecure,
            cacert: o.cacert.clone(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::parse;

    /// What a run depends on, for comparing two experiments (titles aside).
    fn shape(e: &Experiment) -> String {
        format!(
            "{:?}",
            (
                &e.cells,
                &e.factors,
                e.repetitions,
                e.timeout,
                &e.columns,
                &e.baseline,
                e.seed,
                &e.page,
                &e.metric,
                &e.origins,
                e.workload
            )
        )
    }

    /// A description builds the experiment that the same settings in a file parse to, with
    /// and without overrides.
    #[test]
    fn a_description_builds_what_the_same_file_parses_to() {
        let text = |s: &str| FactorValue::Text(s.into());
        let described = Description {
            name: "d".into(),
            title: "t".into(),
            description: String::new(),
            workload: Workload::Resources,
            repetitions: 5,
            timeout: Duration::from_secs(60),
            columns: Some("resources"),
            baseline: Some(Protocol::H2),
            seed: None,
            page: None,
            metric: None,
            origins: vec![UrlOriginInput {
                name: "site".into(),
                urls: [
                    (Protocol::H2, "https://a.test:8443".to_string()),
                    (Protocol::H3, "https://a.test:8443".to_string()),
                ]
                .into_iter()
                .collect(),
                path: "/app.js".into(),
                insecure: true,
                cacert: None,
            }],
            factors: vec![
                ("origin", vec![text("site")]),
                ("protocol", vec![text("h2"), text("h3"), text("h1")]),
                ("resources", vec![FactorValue::Int(6), FactorValue::Int(30)]),
            ],
        };
        let file = r#"
            name = "d"
            title = "t"
            workload = "resources"
            repetitions = 5
            timeout = "60s"
            columns = "resources"
            baseline = "h2"
            origin = "site"
            protocol = ["h2", "h3", "h1"]
            resources = [6, 30]
            [origins.site]
            protocols = ["h2", "h3"]
            path = "/app.js"
            insecure = true
            [origins.site.urls]
            h2 = "https://a.test:8443"
            h3 = "https://a.test:8443"
        "#;
        for overrides in [
            Overrides::default(),
            Overrides {
                set: vec!["resources=1".into()],
                repetitions: Some(2),
                ..Overrides::default()
            },
        ] {
            let built = described.clone().build(&overrides).expect("build");
            let parsed = parse("d.toml", file, &overrides).expect("parse");
            assert_eq!(shape(&built), shape(&parsed));
            assert_eq!((built.name, built.title), (parsed.name, parsed.title));
        }
    }

    #[test]
    fn bad_values_are_refused_as_in_a_file() {
        let mut d = Description {
            name: "d".into(),
            title: String::new(),
            description: String::new(),
            workload: Workload::Resources,
            repetitions: 1,
            timeout: Duration::from_secs(1),
            columns: None,
            baseline: None,
            seed: None,
            page: None,
            metric: None,
            origins: Vec::new(),
            factors: vec![("protocol", vec![FactorValue::Text("h9".into())])],
        };
        let e = d
            .clone()
            .build(&Overrides::default())
            .expect_err("h9")
            .to_string();
        assert!(e.contains("h9"), "{e}");
        d.factors = vec![("protocol", vec![FactorValue::Text("h2".into())])];
        d.origins = vec![UrlOriginInput {
            name: "site".into(),
            urls: [(Protocol::H2, "http://a.test".to_string())]
                .into_iter()
                .collect(),
            path: "/".into(),
            insecure: false,
            cacert: None,
        }];
        let e = d
            .build(&Overrides::default())
            .expect_err("scheme")
            .to_string();
        assert!(e.contains("urls.h2"), "{e}");
    }
}
