//! `rooftop import-hf`: a Hugging Face config.json to a model TOML. The import itself is
//! pure (`crate::import_hf`); this reads the files, prints the warnings to stderr, and writes
//! the TOML to `--out` or returns it for stdout.

use crate::cli::ImportHfArgs;
use crate::error::{Error, Result};
use crate::spec::registry;

pub fn run(a: &ImportHfArgs) -> Result<String> {
    let (path, name, quant_config, out) = (
        a.path.as_path(),
        a.name.as_deref(),
        a.quant_config.as_deref(),
        a.out.as_deref(),
    );
    let imported = registry::read_hf(path, quant_config, name)?;
    for w in &imported.warnings {
        crate::cli::stderr_line(&format!("warning: {w}"));
    }
    match out {
        Some(o) => {
            std::fs::write(o, &imported.toml).map_err(|error| Error::Io {
                path: o.to_path_buf(),
                error,
            })?;
            crate::cli::stderr_line(&format!(
                "wrote {} (model \"{}\")",
                o.display(),
                imported.model.name
            ));
            Ok(String::new())
        }
        None => Ok(imported.toml),
    }
}
