//! `rooftop list` and `rooftop show`: what is built in.

use crate::error::{Error, Result};
use crate::export::rows::CatalogRow;
use crate::export::{self, table, Format, Table, Tabular};
use crate::spec::registry::{self, builtin_names, builtin_text, Kind};
use crate::spec::System;

fn describe(kind: Kind, name: &str) -> String {
    let d = match kind {
        Kind::Gpu => registry::load_gpu(name).map(|g| {
            format!(
                "{}: {}, {}",
                g.full_name, g.memory_capacity, g.memory_bandwidth
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
        Kind::Measured => Ok(String::new()),
    };
    d.unwrap_or_else(|e| format!("(invalid: {e})"))
}

pub fn list(kind: &str, format: Format) -> Result<Vec<u8>> {
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

pub fn show(name: &str) -> Result<String> {
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
            return Ok(t.to_string());
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
