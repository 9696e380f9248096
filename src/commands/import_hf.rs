//! `rooftop import-hf`: a Hugging Face config.json to a model TOML. The import itself is
//! pure (`crate::import_hf`); this reads the files, prints the warnings to stderr, and writes
//! the TOML to `--out` or returns it for stdout.

use crate::error::{Error, Result};
use crate::spec::registry;
use std::path::Path;

pub fn run(
    path: &Path,
    name: Option<&str>,
    quant_config: Option<&Path>,
    out: Option<&Path>,
) -> Result<String> {
    let imported = registry::read_hf(path, quant_config, name)?;
    for w in &imported.warnings {
        eprintln!("warning: {w}");
    }
    match out {
        Some(o) => {
            std::fs::write(o, &imported.toml).map_err(|source| Error::Io {
                path: o.to_path_buf(),
                source,
            })?;
            eprintln!("wrote {} (model \"{}\")", o.display(), imported.model.name);
            Ok(String::new())
        }
        None => Ok(imported.toml),
    }
}
