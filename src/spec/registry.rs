//! Finding descriptions: a path given by the user, or a built-in embedded in the binary.
//!
//! Every file under `configs/` is compiled in (see `build.rs`), so `rooftop` works from any
//! directory. A user's path always wins over a built-in name. Parsing and validation errors
//! name the file, the line and the field.

use crate::error::{line_of_field, Error, Result};
use crate::import_hf::{self, Imported};
use crate::spec::engine::EngineFile;
use crate::spec::{GpuSpec, InterconnectSpec, ModelSpec, SystemSpec};
use serde::de::DeserializeOwned;
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/builtin_configs.rs"));

/// Kinds of description, named as their folders under `configs/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gpu,
    Interconnect,
    System,
    Model,
    Measured,
    Engine,
    Client,
}

impl Kind {
    pub fn folder(self) -> &'static str {
        match self {
            Kind::Gpu => "gpus",
            Kind::Interconnect => "interconnects",
            Kind::System => "systems",
            Kind::Model => "models",
            Kind::Measured => "measured",
            Kind::Engine => "engines",
            Kind::Client => "clients",
        }
    }
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Gpu => "GPU",
            Kind::Interconnect => "interconnect",
            Kind::System => "system",
            Kind::Model => "model",
            Kind::Measured => "measurement",
            Kind::Engine => "engine",
            Kind::Client => "client",
        }
    }
}

/// Names of the built-ins of one kind, sorted.
pub fn builtin_names(kind: Kind) -> Vec<&'static str> {
    BUILTINS
        .iter()
        .filter(|(k, _, _)| *k == kind.folder())
        .map(|(_, n, _)| *n)
        .collect()
}

/// The embedded text of a built-in.
pub fn builtin_text(kind: Kind, name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(k, n, _)| *k == kind.folder() && *n == name)
        .map(|(_, _, t)| *t)
}

/// A description's source text and a label for errors (the path, or `built-in <kind>/<name>`).
pub fn load_text(kind: Kind, name_or_path: &str) -> Result<(String, String)> {
    let p = Path::new(name_or_path);
    let looks_like_path = name_or_path.contains('/')
        || name_or_path.ends_with(".toml")
        || name_or_path.ends_with(".json");
    // A folder is read too (and refused there, saying so): "unknown model" would send the
    // user looking for a typo in a name they gave right.
    let folder = p.is_dir() && builtin_text(kind, name_or_path).is_none();
    if crate::files::is_readable(p)
        || folder
        || (looks_like_path && !p.exists() && builtin_text(kind, name_or_path).is_none())
    {
        let text = crate::files::read_text(p)?;
        return Ok((text, name_or_path.to_string()));
    }
    match builtin_text(kind, name_or_path) {
        Some(t) => Ok((
            t.to_string(),
            format!("configs/{}/{}.toml", kind.folder(), name_or_path),
        )),
        None => Err(Error::Unknown {
            kind: kind.noun(),
            name: name_or_path.to_string(),
            known: builtin_names(kind).join(", "),
        }),
    }
}

/// Parse TOML text into `T`, mapping errors to `Error::Parse` with the file label.
pub fn parse_toml<T: DeserializeOwned>(text: &str, label: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::Parse {
        file: label.to_string(),
        message: e.to_string().trim_end().replace('\n', "\n  "),
    })
}

fn invalid(label: &str, text: &str, (field, expected): (String, String)) -> Error {
    Error::Invalid {
        file: label.to_string(),
        line: line_of_field(text, &field),
        field,
        expected,
    }
}

/// The built-in GPUs a device name as CUDA or ROCm reports it names best: (the most words
/// of a GPU's `full_name` it shares, the GPUs that share that many). Vendor words (`NVIDIA`,
/// `AMD`) count for nothing; case is ignored. (0, every GPU) where it shares none.
pub fn gpus_named_by(device: &str) -> (usize, Vec<String>) {
    let words = |t: &str| -> Vec<String> {
        t.split(|c: char| c.is_whitespace() || c == '-' || c == '(' || c == ')')
            .map(str::to_ascii_lowercase)
            .filter(|w| !w.is_empty() && w != "nvidia" && w != "amd")
            .collect()
    };
    let seen = words(device);
    let mut best = (0, Vec::new());
    for n in builtin_names(Kind::Gpu) {
        let Ok(g) = load_gpu(n) else { continue };
        let shared = words(&g.full_name)
            .iter()
            .filter(|w| seen.contains(w))
            .count();
        if shared > best.0 {
            best = (shared, vec![g.name.clone()]);
        } else if shared == best.0 {
            best.1.push(g.name.clone());
        }
    }
    best
}

pub fn load_gpu(name: &str) -> Result<GpuSpec> {
    let (text, label) = load_text(Kind::Gpu, name)?;
    let g: GpuSpec = parse_toml(&text, &label)?;
    g.validate().map_err(|e| invalid(&label, &text, e))?;
    Ok(g)
}

pub fn load_interconnect(name: &str) -> Result<InterconnectSpec> {
    let (text, label) = load_text(Kind::Interconnect, name)?;
    let i: InterconnectSpec = parse_toml(&text, &label)?;
    i.validate().map_err(|e| invalid(&label, &text, e))?;
    Ok(i)
}

pub fn load_system_spec(name: &str) -> Result<SystemSpec> {
    let (text, label) = load_text(Kind::System, name)?;
    let s: SystemSpec = parse_toml(&text, &label)?;
    s.validate().map_err(|e| invalid(&label, &text, e))?;
    Ok(s)
}

/// An engine description by built-in name or path (rules not yet resolved for a system).
pub fn load_engine(name: &str) -> Result<EngineFile> {
    let (text, label) = load_text(Kind::Engine, name)?;
    parse_toml(&text, &label)
}

/// A client description by built-in name or path, validated.
pub fn load_client(name: &str) -> Result<crate::spec::client::ClientSpec> {
    let (text, label) = load_text(Kind::Client, name)?;
    let c: crate::spec::client::ClientSpec = parse_toml(&text, &label)?;
    c.validate().map_err(|e| invalid(&label, &text, e))?;
    Ok(c)
}

/// A model by built-in name, TOML path, or Hugging Face `config.json` path or checkpoint
/// folder holding one (imported with
/// `import_hf`; its warnings are dropped here, `rooftop import-hf` shows them).
pub fn load_model(name: &str) -> Result<ModelSpec> {
    let path = Path::new(name);
    if (name.ends_with(".json") && crate::files::is_readable(path))
        || path.join("config.json").is_file()
    {
        return read_hf(path, None, None).map(|i| i.model);
    }
    let (text, label) = load_text(Kind::Model, name)?;
    let m: ModelSpec = parse_toml(&text, &label)?;
    m.validate().map_err(|e| invalid(&label, &text, e))?;
    Ok(m)
}

/// Read a Hugging Face `config.json` and import it, with `quant` (a ModelOpt
/// `hf_quant_config.json`) or else the `hf_quant_config.json` beside it, if there is one.
pub fn read_hf(config: &Path, quant: Option<&Path>, name: Option<&str>) -> Result<Imported> {
    let read = crate::files::read_text;
    // A checkpoint's folder stands for the config.json in it, as Hugging Face's own loaders
    // take it.
    let in_folder = config.join("config.json");
    let config = if config.is_dir() {
        if !in_folder.is_file() {
            return Err(Error::Parse {
                file: config.display().to_string(),
                message: "is a directory (folder) with no config.json in it; expected a file: \
                          a Hugging Face config.json, or the checkpoint folder that holds one"
                    .into(),
            });
        }
        in_folder.as_path()
    } else {
        config
    };
    let text = read(config)?;
    let sibling = config.with_file_name("hf_quant_config.json");
    let quant = quant.or_else(|| sibling.is_file().then_some(sibling.as_path()));
    let quant = match quant {
        Some(q) => Some((read(q)?, q.display().to_string())),
        None => None,
    };
    import_hf::import(
        &text,
        &config.display().to_string(),
        quant.as_ref().map(|(t, l)| (t.as_str(), l.as_str())),
        name,
    )
}
