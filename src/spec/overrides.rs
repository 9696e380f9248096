//! `--set key=value`: change any description field for one run, so a what-if needs no new
//! file.
//!
//! The loaded description is turned back into its TOML form, the field is replaced, and the
//! result is read again through the same typed, validated path as a file: units, ranges and
//! unknown keys are checked exactly as in a file. Keys start with the description they
//! change: `gpu.`, `interconnect.` (or `link.`), `system.` (with `efficiency.` as a shortcut
//! for the system's table; `system.engine=NAME` swaps the engine), `engine.` (the resolved
//! engine: `system.engine.X` and a bare `system.X` that the system lacks mean the same), `model.`. A value that is not a TOML literal is
//! taken as a string, so `--set gpu.memory_bandwidth="2.4 TB/s"` and
//! `--set system.cuda_graphs=false` both work. `interconnect.bandwidth` sets the raw
//! per-direction rate and scales the achievable rates with it.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Which description an override changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Gpu,
    Interconnect,
    System,
    Engine,
    Model,
}

/// One parsed `--set`.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub target: Target,
    /// Path inside the description (e.g. `["efficiency", "memory"]`).
    pub path: Vec<String>,
    pub value: toml::Value,
    /// The text as given, for error messages.
    pub raw: String,
}

const SYSTEM_TOP: &[&str] = &[
    "name",
    "description",
    "gpu",
    "gpu_count",
    "interconnect",
    "topology",
    "sockets",
    "gpus_per_switch",
    "p2p",
    "cpu_vendor",
    "paths",
    "price_per_gpu_hour_usd",
    "price_per_gpu_hour",
    "capital_per_gpu",
    "amortisation",
    "electricity",
    "engine",
    "efficiency",
    "sources",
];
const EFFICIENCY: &[&str] = &["memory", "gemm", "attention", "link"];

impl std::str::FromStr for Override {
    type Err = Error;
    fn from_str(s: &str) -> Result<Override> {
        let usage = |why: &str| {
            Error::Scenario(format!("--set {s}: {why}; expected key=value with a key such as gpu.memory_bandwidth, interconnect.bandwidth, system.cuda_graphs, efficiency.memory or model.config.num_experts_per_tok"))
        };
        let (key, value) = s.split_once('=').ok_or_else(|| usage("no '='"))?;
        let key = key.trim();
        let parts: Vec<String> = key.split('.').map(|p| p.trim().to_string()).collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(usage("the key needs a description and a field"));
        }
        let (target, mut path) = match parts[0].as_str() {
            "gpu" => (Target::Gpu, parts[1..].to_vec()),
            "interconnect" | "link" => (Target::Interconnect, parts[1..].to_vec()),
            "model" => (Target::Model, parts[1..].to_vec()),
            "engine" => (Target::Engine, parts[1..].to_vec()),
            "efficiency" => (Target::System, parts.clone()),
            "system" if parts.len() > 2 && parts[1] == "engine" => {
                (Target::Engine, parts[2..].to_vec())
            }
            "system" => (Target::System, parts[1..].to_vec()),
            other => return Err(usage(&format!("unknown description \"{other}\""))),
        };
        // `system.cuda_graphs` means `system.engine.cuda_graphs` when the system has no
        // top-level key of that name.
        let mut target = target;
        if target == Target::System && path.len() == 1 && !SYSTEM_TOP.contains(&path[0].as_str()) {
            if EFFICIENCY.contains(&path[0].as_str()) {
                path.insert(0, "efficiency".to_string());
            } else {
                target = Target::Engine;
            }
        }
        let v = value.trim();
        let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(v.trim_matches('"').to_string()));
        Ok(Override {
            target,
            path,
            value,
            raw: s.to_string(),
        })
    }
}

/// Apply the overrides for `target` to a loaded description: round-trip through TOML.
pub fn apply<T: Serialize + DeserializeOwned + Clone>(
    spec: &T,
    target: Target,
    overrides: &[Override],
    label: &str,
) -> Result<T> {
    let mine: Vec<&Override> = overrides.iter().filter(|o| o.target == target).collect();
    if mine.is_empty() {
        return Ok(spec.clone());
    }
    let mut root =
        toml::Value::try_from(spec).map_err(|e| Error::Scenario(format!("{label}: {e}")))?;
    for o in &mine {
        if target == Target::Interconnect && o.path == ["bandwidth"] {
            set_link_bandwidth(&mut root, o)?;
            continue;
        }
        let path = canonical_path(target, &o.path);
        set(&mut root, &path, o.value.clone())
            .map_err(|why| Error::Scenario(format!("--set {}: {why}", o.raw)))?;
    }
    let text = toml::to_string(&root).map_err(|e| Error::Scenario(format!("{label}: {e}")))?;
    toml::from_str(&text).map_err(|e| {
        let names: Vec<&str> = mine.iter().map(|o| o.raw.as_str()).collect();
        Error::Scenario(format!(
            "--set {}: {label} no longer reads: {}",
            names.join(", "),
            e.message()
        ))
    })
}

/// A model override's path with a `[config]` alias (`num_experts`) read as the field it
/// stands for (`n_routed_experts`): the description serialises under the field's own name,
/// so setting the alias would add a second key that no longer reads.
fn canonical_path(target: Target, path: &[String]) -> Vec<String> {
    let mut p = path.to_vec();
    if target == Target::Model && p.len() == 2 && p[0] == "config" {
        if let Some((_, field)) = crate::spec::model::CONFIG_ALIASES
            .iter()
            .find(|(alias, _)| *alias == p[1])
        {
            p[1] = field.to_string();
        }
    }
    p
}

fn set(
    root: &mut toml::Value,
    path: &[String],
    value: toml::Value,
) -> std::result::Result<(), String> {
    let mut cur = root;
    for (i, p) in path.iter().enumerate() {
        let table = cur
            .as_table_mut()
            .ok_or_else(|| format!("\"{}\" is not a table", path[..i].join(".")))?;
        if i + 1 == path.len() {
            // A count written with an exponent (`1e6`) for a field that holds a whole number
            // is that number, as on the command line; a fraction stays a float and is refused.
            let value = match (table.get(p), value) {
                (Some(toml::Value::Integer(_)), toml::Value::Float(f))
                    if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 =>
                {
                    toml::Value::Integer(f as i64)
                }
                (_, v) => v,
            };
            table.insert(p.clone(), value);
            return Ok(());
        }
        if !table.contains_key(p) {
            let known = table.keys().cloned().collect::<Vec<_>>().join(", ");
            let here = path[..=i].join(".");
            return Err(format!(
                "no table \"{here}\" (known: {known}); a table the description leaves out \
                 is set whole, with its keys inline: '...{here}={{key = value, ...}}'"
            ));
        }
        cur = table
            .get_mut(p)
            .ok_or_else(|| format!("no table \"{}\"", path[..=i].join(".")))?;
    }
    Ok(())
}

/// `interconnect.bandwidth`: the raw rate; achievable rates keep their fraction of it.
fn set_link_bandwidth(root: &mut toml::Value, o: &Override) -> Result<()> {
    let err = |why: String| Error::Scenario(format!("--set {}: {why}", o.raw));
    let new = match &o.value {
        toml::Value::String(s) => {
            crate::units::BytesPerSec::parse(s).map_err(|e| err(e.to_string()))?
        }
        _ => return Err(err("expected a bandwidth such as \"128 GB/s\"".into())),
    };
    let t = root
        .as_table_mut()
        .ok_or_else(|| err("not a table".into()))?;
    let old = t
        .get("bandwidth_per_direction")
        .and_then(|v| v.as_str())
        .and_then(|s| crate::units::BytesPerSec::parse(s).ok())
        .ok_or_else(|| err("the interconnect has no bandwidth_per_direction".into()))?;
    let ratio = if old.0 > 0.0 { new.0 / old.0 } else { 1.0 };
    for k in ["p2p_bandwidth", "cross_socket_bandwidth"] {
        if let Some(v) = t
            .get(k)
            .and_then(|v| v.as_str())
            .and_then(|s| crate::units::BytesPerSec::parse(s).ok())
        {
            t.insert(
                k.into(),
                toml::Value::String(crate::units::BytesPerSec(v.0 * ratio).to_string()),
            );
        }
    }
    t.insert(
        "bandwidth_per_direction".into(),
        toml::Value::String(new.to_string()),
    );
    Ok(())
}

/// Parse every `--set`.
pub fn parse_all(sets: &[String]) -> Result<Vec<Override>> {
    sets.iter().map(|s| s.parse()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_and_values() {
        let o: Override = "system.cuda_graphs=false".parse().unwrap();
        assert_eq!(o.target, Target::Engine);
        assert_eq!(o.path, vec!["cuda_graphs"]);
        assert_eq!(o.value, toml::Value::Boolean(false));
        let o: Override = "engine.max_num_seqs=128".parse().unwrap();
        assert_eq!(
            (o.target, o.path),
            (Target::Engine, vec!["max_num_seqs".into()])
        );
        let o: Override = "gpu.memory_bandwidth=2.4 TB/s".parse().unwrap();
        assert_eq!(o.value, toml::Value::String("2.4 TB/s".into()));
        let o: Override = "efficiency.memory=0.9".parse().unwrap();
        assert_eq!(o.path, vec!["efficiency", "memory"]);
        assert!("nonsense".parse::<Override>().is_err());
        assert!("cpu.cores=4".parse::<Override>().is_err());
        assert!("gpu=3".parse::<Override>().is_err());
    }

    /// A `[config]` field set under the alias another family's config spells it with sets
    /// that field (before, it added a second key and the model no longer read).
    #[test]
    fn a_config_alias_sets_its_field() {
        for (model, alias, field_of) in [
            (
                "qwen3-30b-a3b",
                "num_experts",
                (|c| c.n_routed_experts) as fn(&crate::spec::model::ModelConfig) -> Option<u32>,
            ),
            ("mixtral-8x7b", "num_local_experts", |c| c.n_routed_experts),
            ("gpt-oss-120b", "experts_per_token", |c| {
                c.num_experts_per_tok
            }),
        ] {
            let m = crate::spec::registry::load_model(model).unwrap();
            let o: Override = format!("model.config.{alias}=2").parse().unwrap();
            let set = apply(&m, Target::Model, &[o], model).unwrap();
            assert_eq!(field_of(&set.config), Some(2), "{model} {alias}");
        }
    }
}
