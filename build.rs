//! Embeds every description under `configs/` into the binary, so the tool works from any
//! directory: generates a table of (kind, name, text) for `src/spec/registry.rs`.

use std::fs;
use std::path::Path;

fn main() {
    // Read at run time, not with env!(): a build script compiled in one checkout must embed
    // the configs of the checkout it runs for (a moved or copied target directory).
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("configs");
    println!("cargo:rerun-if-changed=configs");
    let mut out = String::from("pub static BUILTINS: &[(&str, &str, &str)] = &[\n");
    for kind in ["gpus", "interconnects", "systems", "models", "measured"] {
        let dir = root.join(kind);
        println!("cargo:rerun-if-changed={}", dir.display());
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        for f in files {
            println!("cargo:rerun-if-changed={}", f.display());
            let name = f.file_stem().unwrap().to_string_lossy().to_string();
            out.push_str(&format!(
                "    ({kind:?}, {name:?}, include_str!({:?})),\n",
                f.display().to_string()
            ));
        }
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_configs.rs");
    fs::write(dest, out).unwrap();
}
