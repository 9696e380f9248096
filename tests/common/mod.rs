//! Where the tests find measured data: the copies under `tests/data` (always there, so a bare
//! clone's `cargo test` checks them), and the project's shared folder beside the checkout
//! (`../shared`), which may hold newer data and is checked too when present.

#![allow(dead_code)]

use std::path::PathBuf;

/// `tests/data/<name>`: a folder that ships with the repository. Panics (a failing test)
/// when it is missing, never skips.
pub fn data(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    assert!(
        d.exists(),
        "{} is missing: it ships with the repository (tests/data/README.md)",
        d.display()
    );
    d
}

/// `../shared/<path>` beside the checkout, or `None` with a line on stderr saying that
/// only the repository's copies were checked.
pub fn shared(path: &str) -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(path);
    if d.exists() {
        Some(d)
    } else {
        eprintln!(
            "note: {} is absent; checked the repository's copy under tests/data only",
            d.display()
        );
        None
    }
}

/// The repository's copy first, then the shared folder's when present.
pub fn data_and_shared(name: &str, shared_path: &str) -> Vec<PathBuf> {
    let mut v = vec![data(name)];
    v.extend(shared(shared_path));
    v
}
