//! `rooftop list` and `rooftop show`: what is built in.

use crate::cli::{ListArgs, ShowArgs};
use crate::error::{Error, Result};
use crate::export::rows::CatalogRow;
use crate::export::{self, table, Table, Tabular};
use crate::spec::registry::{self, builtin_names, builtin_text, Kind};
use crate::spec::System;

fn describe(kind: Kind, name: &str) -> String {
    let d = match kind {
        Kind::Gpu => registry::load_gpu(name).map(|g| {
            format!(
                "{}: {:.1} GB, {}",
                g.full_name,
                g.memory_capacity.0 / 1e9,
                g.memory_bandwidth
            )
        }),
        Kind::Interconnect => registry::load_interconnect(name).map(|l| {
            format!(
                "{}: {} per direction",
                l.full_name, l.bandwidth_per_direction
            )
        }),
        Kind::System => System::load(name).map(|s| s.spec.description),
        Kind::Model => registry::load_model(name).map(|m| m.full_name),
        Kind::Engine => registry::load_engine(name).map(|e| e.description),
        Kind::Client => registry::load_client(name).map(|c| c.description),
        Kind::Measured => describe_measured(name),
    };
    d.unwrap_or_else(|e| format!("(invalid: {e})"))
}

/// What a built-in measurement holds: the model and system it was taken on, and how many
/// points of which kinds.
fn describe_measured(name: &str) -> Result<String> {
    let text = builtin_text(Kind::Measured, name).unwrap_or_default();
    let set = crate::measured::parse_text(
        text,
        name,
        crate::measured::FileFormat::Toml,
        &Default::default(),
    )?;
    let mut kinds: Vec<&str> = set
        .observations
        .iter()
        .map(|o| o.quantity.kind_name())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    Ok(format!(
        "{} on {}: {} measured points ({})",
        set.model.as_deref().unwrap_or("model not named"),
        set.system.as_deref().unwrap_or("system not named"),
        set.observations.len(),
        kinds.join(", ")
    ))
}

pub fn list(a: &ListArgs) -> Result<Vec<u8>> {
    let (kind, format) = (a.kind.as_str(), a.format);
    let k = match kind {
        "gpus" => Kind::Gpu,
        "interconnects" => Kind::Interconnect,
        "systems" => Kind::System,
        "models" => Kind::Model,
        "engines" => Kind::Engine,
        "clients" => Kind::Client,
        _ => Kind::Measured,
    };
    let entries: Vec<CatalogRow> = builtin_names(k)
        .into_iter()
        .map(|n| CatalogRow {
            name: n.to_string(),
            description: describe(k, n),
        })
        .collect();
    export::export(&entries, format, |e| {
        let rows: Vec<Vec<String>> = e
            .iter()
            .map(|e| vec![e.name.clone(), e.description.clone()])
            .collect();
        table(&["name", "description"], &rows)
    })
}

impl Tabular for Vec<CatalogRow> {
    type Row<'a> = &'a CatalogRow;
    fn table(&self) -> Table<&CatalogRow> {
        Table::flat(self.iter().collect())
    }
}

/// `model_params` of a built-in model as trailing TOML comments: counted from the
/// description (`cost::memory::count_params`), MTP and vision apart, and the weight bytes.
fn model_params_note(name: &str) -> Result<String> {
    let m = crate::spec::registry::load_model(name)?;
    let p = crate::cost::memory::count_params(&m);
    Ok(format!(
        "\n# model_params (counted from this description): total {:.2}B, active {:.2}B (embedding {:.2}B within both), mtp {:.2}B, vision {:.2}B; weights {:.1} GB as stored\n",
        p.total / 1e9,
        p.active / 1e9,
        p.embedding / 1e9,
        p.mtp / 1e9,
        p.vision / 1e9,
        p.weight_bytes / 1e9
    ))
}

pub fn show(a: &ShowArgs) -> Result<String> {
    let name = a.name.as_str();
    for k in [
        Kind::System,
        Kind::Model,
        Kind::Gpu,
        Kind::Interconnect,
        Kind::Engine,
        Kind::Client,
        Kind::Measured,
    ] {
        if let Some(t) = builtin_text(k, name) {
            let mut t = t.to_string();
            if k == Kind::Model {
                t.push_str(&model_params_note(name)?);
            }
            return Ok(t);
        }
    }
    let all: Vec<&str> = [
        Kind::System,
        Kind::Model,
        Kind::Gpu,
        Kind::Interconnect,
        Kind::Engine,
        Kind::Client,
        Kind::Measured,
    ]
    .iter()
    .flat_map(|k| builtin_names(*k))
    .collect();
    Err(Error::Unknown {
        kind: "description",
        name: name.to_string(),
        known: all.join(", "),
    })
}
