//! Where the tests find measured data: the copies under `tests/data` (always there, so a bare
//! clone's `cargo test` checks them), and the project's shared folder beside the checkout
//! (`../shared`), which may hold newer data and is checked too when present.

#![allow(dead_code)]

use std::path::PathBuf;

use rooftop::cost::collective::{self, CollectiveCost};
use rooftop::cost::CostParams;
use rooftop::spec::System;

/// A collective's price: system, bytes per rank, ranks, parameters.
pub type Collective = fn(&System, f64, u32, &CostParams) -> CollectiveCost;

/// A built-in system (or a system file) with `--set` overrides, which must load.
pub fn load_system(name: &str, sets: &[&str]) -> System {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    System::load_with(name, &rooftop::spec::overrides::parse_all(&sets).unwrap()).unwrap()
}

/// [`load_system`] running `engine` (a built-in name, `NAME@RELEASE` allowed).
pub fn load_system_with_engine(name: &str, engine: &str, sets: &[&str]) -> System {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sets = rooftop::spec::overrides::parse_all(&sets).unwrap();
    System::load_with_engine(name, Some(engine), &sets).unwrap()
}

/// The four collectives the cost model prices, with their names.
pub const COLLECTIVES: [(&str, Collective); 4] = [
    ("all-reduce", collective::allreduce),
    ("all-gather", collective::all_gather),
    ("reduce-scatter", collective::reduce_scatter),
    ("all-to-all", collective::all_to_all),
];

/// Keys of a serialised record whose value is absent (`null`) by design: no sliding window,
/// a memory-only operator, a GPU that states no board power (watts and joules), a system
/// that states no price (dollars). Any other `null` is a NaN or an infinity that serde_json
/// wrote as `null`.
pub const ABSENT_BY_DESIGN: &[&str] = &[
    "window",
    "math",
    "watts_per_gpu",
    "joules_per_token",
    "usd_per_million_output_tokens",
    "usd_per_million_total_tokens",
];

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

/// What `rooftop ARGS` did: its exit status, standard output and standard error.
pub fn output_of<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

/// The standard error of `rooftop ARGS`, which must fail (a test failure where it succeeds).
pub fn failure_of(args: &[&str]) -> String {
    let out = output_of(args);
    assert!(!out.status.success(), "rooftop {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What `rooftop ARGS` writes to standard output; the run must succeed (its arguments and
/// standard error in the failure).
pub fn stdout_of(args: &[&str]) -> String {
    let out = output_of(args);
    assert!(
        out.status.success(),
        "rooftop {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON `rooftop ARGS` writes, which must succeed (its standard error in the failure).
pub fn json_of(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout_of(args)).unwrap()
}
