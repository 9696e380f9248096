//! Fuzzing of every reader: description TOML (GPU, interconnect, system, model), the team's
//! macro log, vLLM benchmark JSON, nccl-tests output, GEMM CSV, profiler traces, rooftop's
//! measurement TOML, calibration files, `--set` overrides, Hugging Face `config.json`
//! import, unit strings, layouts and acceptance lengths.
//!
//! `cargo fuzz` needs the `cargo-fuzz` subcommand, which this project does not install; the
//! fuzzing is done with proptest instead, on two kinds of input:
//! - arbitrary text and bytes;
//! - structure-aware mutations of the valid fixtures (`configs/`, `tests/fixtures/`): lines
//!   deleted, duplicated or swapped, the text cut at any byte, numbers replaced by huge,
//!   negative, NaN or empty ones, units flipped, unicode inserted, and, for TOML and JSON,
//!   edits of the parsed tree (values replaced by hostile ones, keys deleted or renamed).
//!
//! Every target asserts: no panic; an error names the file (and, where the format has lines
//! and the error points at one, a line that exists); a success holds only finite numbers,
//! and a description that reads and validates evaluates to finite, positive times.
//!
//! Each target runs a few cases in the normal test run. The `#[ignore]`d `long_*` tests run
//! each target for a bounded time (`FUZZ_SECONDS`, default 60):
//! `cargo test --release --test fuzz_readers -- --ignored --nocapture`.

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use regex::Regex;
use rooftop::calibrate::Calibration;
use rooftop::cli::ScenarioArgs;
use rooftop::commands;
use rooftop::cost::{CostParams, Evaluator, Parallel, Pass, StepCost};
use rooftop::error::Error;
use rooftop::import_hf;
use rooftop::measured::{
    parse_text, FileFormat, MeasuredSet, Quantity, ReadOptions, MIN_MEASURED_SECONDS,
};
use rooftop::predict::{predict, Scenario};
use rooftop::serve::{sweep, TpotDef, Workload};
use rooftop::spec::overrides::Override;
use rooftop::spec::registry::{self, load_gpu, load_interconnect, load_model, load_system_spec};
use rooftop::spec::system::{EngineRef, EngineSpec};
use rooftop::spec::{GpuSpec, InterconnectSpec, ModelSpec, System, SystemSpec, WeightFormat};
use rooftop::specdec::Acceptance;
use rooftop::units::{Bytes, BytesPerSec, FlopsPerSec, Hertz, Seconds};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------

/// Cases per target in the normal (fast) run.
const FAST_CASES: u32 = 24;
/// A single case slower than this is a failure (a hang in the making).
const SLOW_CASE: Duration = Duration::from_secs(10);

fn fuzz_seconds() -> u64 {
    std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

/// Run `test` on inputs from `strategy`: `FAST_CASES` cases, or batches of cases until
/// `FUZZ_SECONDS` have passed when `long`. A failure is shrunk by proptest and reported with
/// its minimal input. The normal run draws its cases from a fixed seed, so that `cargo test`
/// passes or fails the same way on every machine; the long runs draw afresh each time, to
/// find what the fixed cases do not.
fn fuzz<S>(
    name: &str,
    long: bool,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let budget = Duration::from_secs(if long { fuzz_seconds() } else { 0 });
    let start = Instant::now();
    ACCEPTED.with(|a| a.set(0));
    let mut cases = 0u64;
    let test = |v: S::Value| {
        let t = Instant::now();
        let r = test(v);
        let took = t.elapsed();
        if took > SLOW_CASE {
            return Err(TestCaseError::fail(format!("one case took {took:?}")));
        }
        r
    };
    let test = &test;
    loop {
        let batch = if long { 256 } else { FAST_CASES };
        let config = Config {
            cases: batch,
            failure_persistence: None,
            max_shrink_iters: 4096,
            ..Config::default()
        };
        let mut runner = if long {
            TestRunner::new(config)
        } else {
            TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
        };
        match runner.run(&strategy, test) {
            Ok(()) => {}
            Err(TestError::Fail(why, input)) => {
                panic!("{name}: {why}\nminimal failing input: {input:#?}")
            }
            Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
        }
        cases += u64::from(batch);
        if start.elapsed() >= budget {
            break;
        }
    }
    // Shrinking re-runs failing inputs, so the count is of runs, close to the cases.
    println!(
        "fuzz {name}: {cases} cases in {:.1} s, {} read successfully",
        start.elapsed().as_secs_f64(),
        ACCEPTED.with(|a| a.get())
    );
}

thread_local! {
    /// Cases of the running target whose input was read successfully (and so went on to be
    /// evaluated), to show how deep the inputs reach.
    static ACCEPTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Count a case whose input was accepted.
fn accepted() {
    ACCEPTED.with(|a| a.set(a.get() + 1));
}

/// Run `f`; a panic becomes a test failure naming `what`.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked: {msg}"))
    })
}

/// Add the rendered input to a failure, so the minimal case can be read and kept.
fn on_input(text: &str, r: Result<(), TestCaseError>) -> Result<(), TestCaseError> {
    r.map_err(|e| match e {
        TestCaseError::Fail(why) => {
            let shown: String = text.chars().take(6000).collect();
            TestCaseError::fail(format!(
                "{why}\n--- input ({} bytes) ---\n{shown}\n--- end ---",
                text.len()
            ))
        }
        other => other,
    })
}

fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if cond {
        Ok(())
    } else {
        Err(TestCaseError::fail(msg()))
    }
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file in `dir` (relative to the crate) whose name ends with one of `suffixes`.
fn files(dir: &str, suffixes: &[&str]) -> Vec<String> {
    let mut v: Vec<(PathBuf, String)> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            suffixes.iter().any(|s| n.ends_with(s))
        })
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {dir}");
    v.into_iter().map(|(_, t)| t).collect()
}

fn measured(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| std::fs::read_to_string(root().join("tests/fixtures/measured").join(n)).unwrap())
        .collect()
}

/// Numbers a hostile or careless file may hold.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "0.0",
    "1e308",
    "1e309",
    "-1e308",
    "1e-320",
    "1e300",
    "1e-300",
    "4294967295",
    "4294967296",
    "2147483648",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "99999999999999999999999",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "+inf",
    "",
    ".",
    "-",
    "1e",
    "0x10",
    "1_000",
    "3.5",
    "65536",
    "1000000",
    "00",
    "1..2",
    "1,5",
];

/// Units, right and wrong.
const UNITS: &[&str] = &[
    "B", "KB", "GB", "GiB", "TB", "s", "ms", "us", "µs", "ns", "GB/s", "TB/s", "MB/s", "B/s",
    "TFLOPS", "PFLOPS", "TOPS", "FLOPS", "MHz", "GHz", "tok/s", "req/s", "%", "", "gb/s", "Gb/s",
    "TB/s/s", "tokens", "s,", "EB", "µ",
];

/// Text to insert: unicode, control characters, syntax.
const SNIPPETS: &[&str] = &[
    "\u{feff}",
    "\u{0}",
    "\r\n",
    "\n",
    "\r",
    "\t",
    "é",
    "µ",
    "日本語",
    "\u{202e}",
    "\u{10ffff}",
    "\u{a0}",
    "💥",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    ",",
    "=",
    "#",
    ":",
    "\\",
    "\\u0000",
    " ",
    "null",
    "true",
    "[]",
    "{}",
    "[[points]]",
    "Trial 1: 0.4s, 32 tokens",
    "Trial 2: 1e308s, 4294967295 tokens",
    "#  Rank  0 Group  0 Pid 1 on h device  0 [0x18] X",
    "all_reduce_perf -g 0",
    "all_reduce_perf -g 4294967295 -t 2",
    "Concurrency 0: 1e308 tok/s",
    "Testing concurrency=0...",
    "  Throughput: 0 tok/s",
    "m,n,k,dtype,time_us",
    "1,1,1,bf16,1e-320",
    "8 2 float sum -1 0 0 0 0 0 0 0 0",
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"dur\":1e308}",
];

/// One edit of a text.
#[derive(Debug, Clone)]
enum Edit {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Truncate(usize),
    ReplaceNumber(usize, usize),
    FlipUnit(usize, usize),
    Insert(usize, usize),
    InsertChar(usize, char),
    CopyToken(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let u = any::<usize>;
    prop_oneof![
        1 => u().prop_map(Edit::DeleteLine),
        1 => u().prop_map(Edit::DuplicateLine),
        1 => (u(), u()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        1 => u().prop_map(Edit::Truncate),
        3 => (u(), u()).prop_map(|(a, b)| Edit::ReplaceNumber(a, b)),
        2 => (u(), u()).prop_map(|(a, b)| Edit::FlipUnit(a, b)),
        2 => (u(), u()).prop_map(|(a, b)| Edit::Insert(a, b)),
        1 => (u(), any::<char>()).prop_map(|(a, c)| Edit::InsertChar(a, c)),
        1 => (u(), u()).prop_map(|(a, b)| Edit::CopyToken(a, b)),
    ]
}

fn number_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?").unwrap())
}

fn unit_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"[0-9] ?([A-Za-zµμ%][A-Za-z/µμ]*)").unwrap())
}

fn token_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r#"[^\s,=:"\[\]{}]+"#).unwrap())
}

/// The largest char boundary at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply_edit(text: &str, e: &Edit) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let pick = |i: usize, n: usize| if n == 0 { 0 } else { i % n };
    match e {
        Edit::DeleteLine(i) if !lines.is_empty() => {
            let k = pick(*i, lines.len());
            lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != k)
                .map(|(_, l)| *l)
                .collect()
        }
        Edit::DuplicateLine(i) if !lines.is_empty() => {
            let k = pick(*i, lines.len());
            let mut v = lines.clone();
            v.insert(k, lines[k]);
            v.concat()
        }
        Edit::SwapLines(a, b) if !lines.is_empty() => {
            let mut v = lines.clone();
            v.swap(pick(*a, lines.len()), pick(*b, lines.len()));
            v.concat()
        }
        Edit::Truncate(at) => text[..floor_boundary(text, pick(*at, text.len() + 1))].to_string(),
        Edit::ReplaceNumber(i, j) => {
            let ms: Vec<_> = number_re().find_iter(text).collect();
            match ms.get(pick(*i, ms.len())) {
                Some(m) => format!(
                    "{}{}{}",
                    &text[..m.start()],
                    NUMBERS[j % NUMBERS.len()],
                    &text[m.end()..]
                ),
                None => text.to_string(),
            }
        }
        Edit::FlipUnit(i, j) => {
            let ms: Vec<_> = unit_re()
                .captures_iter(text)
                .filter_map(|c| c.get(1))
                .collect();
            match ms.get(pick(*i, ms.len())) {
                Some(m) => format!(
                    "{}{}{}",
                    &text[..m.start()],
                    UNITS[j % UNITS.len()],
                    &text[m.end()..]
                ),
                None => text.to_string(),
            }
        }
        Edit::Insert(at, j) => {
            let k = floor_boundary(text, pick(*at, text.len() + 1));
            format!(
                "{}{}{}",
                &text[..k],
                SNIPPETS[j % SNIPPETS.len()],
                &text[k..]
            )
        }
        Edit::InsertChar(at, c) => {
            let k = floor_boundary(text, pick(*at, text.len() + 1));
            format!("{}{c}{}", &text[..k], &text[k..])
        }
        Edit::CopyToken(a, b) => {
            let ms: Vec<_> = token_re().find_iter(text).collect();
            if ms.is_empty() {
                return text.to_string();
            }
            let from = ms[pick(*b, ms.len())].as_str().to_string();
            let to = ms[pick(*a, ms.len())];
            format!("{}{from}{}", &text[..to.start()], &text[to.end()..])
        }
        _ => text.to_string(),
    }
}

/// Hostile TOML values.
fn hostile_toml(j: usize, old: &toml::Value) -> toml::Value {
    use toml::Value as V;
    // Half of the time, keep the old string's shape and change its number or unit.
    if let (V::String(s), true) = (old, j.is_multiple_of(2)) {
        let e = if j.is_multiple_of(4) {
            Edit::ReplaceNumber(0, j / 4)
        } else {
            Edit::FlipUnit(0, j / 4)
        };
        return V::String(apply_edit(s, &e));
    }
    let all = [
        V::Integer(0),
        V::Integer(-1),
        V::Integer(1),
        V::Integer(i64::MAX),
        V::Integer(i64::MIN),
        V::Integer(4_294_967_295),
        V::Integer(4_294_967_296),
        V::Integer(65_536),
        V::Float(f64::NAN),
        V::Float(f64::INFINITY),
        V::Float(f64::NEG_INFINITY),
        V::Float(-0.0),
        V::Float(1e308),
        V::Float(1e-320),
        V::Float(0.5),
        V::Float(1.5),
        V::String("1e300 TB/s".into()),
        V::String("1e300 TB".into()),
        V::String("1e300 PFLOPS".into()),
        V::String("1e300 GHz".into()),
        V::String("-5 GB".into()),
        V::String("nan GB/s".into()),
        V::String("0 s".into()),
        V::String("0 GB/s".into()),
        V::String("1e-320 s".into()),
        V::String("1e-300 B/s".into()),
        V::String(String::new()),
        V::String("inf".into()),
        V::String("0 %".into()),
        V::String("nan %".into()),
        V::String("150 %".into()),
        V::String("bf16".into()),
        V::String("int4-g0".into()),
        V::String("int4-g4294967296".into()),
        V::String("sliding_attention".into()),
        V::Boolean(true),
        V::Array(vec![]),
        V::Array(vec![V::String("fp8".into())]),
        V::Table(toml::Table::new()),
    ];
    all[j % all.len()].clone()
}

/// One edit of a parsed tree: replace a value, delete a key, rename a key, duplicate an
/// array element.
#[derive(Debug, Clone)]
struct TreeEdit {
    node: usize,
    op: u8,
    arg: usize,
}

fn tree_edit() -> impl Strategy<Value = TreeEdit> {
    (any::<usize>(), 0u8..4, any::<usize>()).prop_map(|(node, op, arg)| TreeEdit { node, op, arg })
}

/// Paths (keys and indices) of every value below the root.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn toml_paths(v: &toml::Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        toml::Value::Table(t) => {
            for (k, x) in t {
                at.push(Seg::Key(k.clone()));
                out.push(at.clone());
                toml_paths(x, at, out);
                at.pop();
            }
        }
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Seg::Index(i));
                out.push(at.clone());
                toml_paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn toml_child<'a>(v: &'a mut toml::Value, s: &Seg) -> Option<&'a mut toml::Value> {
    match (v, s) {
        (toml::Value::Table(t), Seg::Key(k)) => t.get_mut(k),
        (toml::Value::Array(a), Seg::Index(i)) => a.get_mut(*i),
        _ => None,
    }
}

fn apply_toml_edit(v: &mut toml::Value, e: &TreeEdit) {
    let mut paths = Vec::new();
    toml_paths(v, &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        return;
    }
    let path = &paths[e.node % paths.len()];
    let (last, parent_path) = path.split_last().unwrap();
    let mut parent = &mut *v;
    for s in parent_path {
        match toml_child(parent, s) {
            Some(p) => parent = p,
            None => return,
        }
    }
    match (parent, last) {
        (toml::Value::Table(t), Seg::Key(k)) => match e.op {
            0 | 3 => {
                let old = t.get(k).cloned().unwrap_or(toml::Value::Boolean(false));
                t.insert(k.clone(), hostile_toml(e.arg, &old));
            }
            1 => {
                t.remove(k);
            }
            _ => {
                if let Some(x) = t.remove(k) {
                    let renamed = match e.arg % 3 {
                        0 => k.to_uppercase(),
                        1 => format!("{k}_ms"),
                        _ => format!("{k}.x"),
                    };
                    t.insert(renamed, x);
                }
            }
        },
        (toml::Value::Array(a), Seg::Index(i)) => match e.op {
            0 | 3 => {
                let old = a[*i].clone();
                a[*i] = hostile_toml(e.arg, &old);
            }
            1 => {
                a.remove(*i);
            }
            _ => {
                let x = a[*i].clone();
                a.push(x);
            }
        },
        _ => {}
    }
}

/// Hostile JSON values.
fn hostile_json(j: usize) -> serde_json::Value {
    use serde_json::json;
    let all = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(1),
        json!(1e308),
        json!(-1e308),
        json!(1e-320),
        json!(4294967295u64),
        json!(4294967296u64),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(0.5),
        json!(""),
        json!("inf"),
        json!("nan"),
        json!("-1"),
        json!("1e999"),
        json!([]),
        json!({}),
        json!([0]),
        json!({"a": 1}),
        json!("日本語"),
        json!(["re:.*"]),
        json!({"num_bits": 4, "group_size": 0, "type": "int"}),
    ];
    all[j % all.len()].clone()
}

fn json_paths(v: &serde_json::Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                at.push(Seg::Key(k.clone()));
                out.push(at.clone());
                json_paths(x, at, out);
                at.pop();
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Seg::Index(i));
                out.push(at.clone());
                json_paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn apply_json_edit(v: &mut serde_json::Value, e: &TreeEdit) {
    let mut paths = Vec::new();
    json_paths(v, &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        return;
    }
    let path = &paths[e.node % paths.len()];
    let (last, parent_path) = path.split_last().unwrap();
    let mut parent = &mut *v;
    for s in parent_path {
        let next = match (parent, s) {
            (serde_json::Value::Object(o), Seg::Key(k)) => o.get_mut(k),
            (serde_json::Value::Array(a), Seg::Index(i)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(p) => parent = p,
            None => return,
        }
    }
    match (parent, last) {
        (serde_json::Value::Object(o), Seg::Key(k)) => match e.op {
            0 | 3 => {
                o.insert(k.clone(), hostile_json(e.arg));
            }
            1 => {
                o.remove(k);
            }
            _ => {
                if let Some(x) = o.remove(k) {
                    o.insert(format!("{k}_x"), x);
                }
            }
        },
        (serde_json::Value::Array(a), Seg::Index(i)) => match e.op {
            0 | 3 => a[*i] = hostile_json(e.arg),
            1 => {
                a.remove(*i);
            }
            _ => {
                let x = a[*i].clone();
                a.push(x);
            }
        },
        _ => {}
    }
}

/// How a fixture's tree is parsed for tree edits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tree {
    Toml,
    Json,
    /// JSON lines or a plain-text format: no tree edits.
    None,
}

/// A fuzz input: arbitrary text, arbitrary bytes, or a fixture with edits.
#[derive(Debug, Clone)]
enum Input {
    Text(String),
    Bytes(Vec<u8>),
    Edited {
        fixture: usize,
        tree: Vec<TreeEdit>,
        text: Vec<Edit>,
    },
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => "\\PC{0,200}".prop_map(Input::Text),
        1 => any::<String>().prop_map(Input::Text),
        1 => proptest::collection::vec(any::<u8>(), 0..300).prop_map(Input::Bytes),
        4 => (
            any::<usize>(),
            proptest::collection::vec(tree_edit(), 0..4),
            proptest::collection::vec(edit(), 0..4),
        )
            .prop_map(|(fixture, tree, text)| Input::Edited { fixture, tree, text }),
        4 => (any::<usize>(), proptest::collection::vec(tree_edit(), 1..6))
            .prop_map(|(fixture, tree)| Input::Edited { fixture, tree, text: vec![] }),
    ]
}

/// The text of an input, given the target's fixtures.
fn render(i: &Input, fixtures: &[String], tree: Tree) -> String {
    match i {
        Input::Text(s) => s.clone(),
        Input::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Input::Edited {
            fixture,
            tree: tree_edits,
            text: edits,
        } => {
            let mut t = fixtures[fixture % fixtures.len()].clone();
            if !tree_edits.is_empty() {
                match tree {
                    Tree::Toml => {
                        if let Ok(mut v) = t.parse::<toml::Table>().map(toml::Value::Table) {
                            for e in tree_edits {
                                apply_toml_edit(&mut v, e);
                            }
                            if let Ok(s) = toml::to_string(&v) {
                                t = s;
                            }
                        }
                    }
                    Tree::Json => {
                        if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&t) {
                            for e in tree_edits {
                                apply_json_edit(&mut v, e);
                            }
                            t = v.to_string();
                        }
                    }
                    Tree::None => {}
                }
            }
            for e in edits {
                t = apply_edit(&t, e);
            }
            t
        }
    }
}

// ---------------------------------------------------------------------------------------
// Checks on what a reader returns
// ---------------------------------------------------------------------------------------

fn finite(what: &str, x: f64) -> Result<(), TestCaseError> {
    check(x.is_finite(), || format!("{what} = {x}"))
}

fn positive(what: &str, x: f64) -> Result<(), TestCaseError> {
    check(x.is_finite() && x > 0.0, || {
        format!("{what} = {x}, expected a finite number above 0")
    })
}

fn non_negative(what: &str, x: f64) -> Result<(), TestCaseError> {
    check(x.is_finite() && x >= 0.0, || {
        format!("{what} = {x}, expected a finite number ≥ 0")
    })
}

/// A measured time: finite and not below what anything measured can take.
fn time(what: &str, x: f64) -> Result<(), TestCaseError> {
    check(x.is_finite() && x >= MIN_MEASURED_SECONDS, || {
        format!("{what}: {x} s, expected at least {MIN_MEASURED_SECONDS} s")
    })
}

fn lines_in(text: &str) -> usize {
    text.lines().count().max(1)
}

/// An error names the file; a line, when given, is one of the text's.
fn check_error(e: &Error, label: &str, text: &str) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    check(msg.starts_with(label), || {
        format!("error does not start with the file label {label:?}: {msg}")
    })?;
    let line = match e {
        Error::Invalid { line, .. } | Error::Measured { line, .. } => *line,
        _ => None,
    };
    if let Some(l) = line {
        check(l >= 1 && l <= lines_in(text) + 1, || {
            format!(
                "error points at line {l}, the text has {}: {msg}",
                lines_in(text)
            )
        })?;
    }
    if let Error::Parse { message, .. } = e {
        check(message.contains("line"), || {
            format!("parse error without a line: {msg}")
        })?;
    }
    Ok(())
}

fn check_measured(set: &MeasuredSet, label: &str, text: &str) -> Result<(), TestCaseError> {
    check(!set.observations.is_empty(), || {
        "success with no observations".into()
    })?;
    for o in &set.observations {
        check(o.origin.file == label, || format!("origin {:?}", o.origin))?;
        if let Some(l) = o.origin.line {
            check(l >= 1 && l <= lines_in(text), || {
                format!("origin line {l} of {} lines", lines_in(text))
            })?;
        }
        let q = format!("{:?}", o.quantity);
        let len_ok = |l: Option<u32>| l.is_none_or(|l| l >= 1);
        match &o.quantity {
            Quantity::Tpot {
                concurrency,
                input_len,
                output_len,
                seconds,
                ..
            } => {
                check(
                    *concurrency >= 1 && *output_len >= 1 && len_ok(*input_len),
                    || q.clone(),
                )?;
                time(&q, *seconds)?;
            }
            Quantity::Ttft {
                concurrency,
                input_len,
                output_len,
                seconds,
            } => {
                check(
                    *concurrency >= 1 && len_ok(*input_len) && len_ok(*output_len),
                    || q.clone(),
                )?;
                time(&q, *seconds)?;
            }
            Quantity::Throughput {
                concurrency,
                input_len,
                output_len,
                tokens_per_second,
            } => {
                check(
                    *concurrency >= 1 && len_ok(*input_len) && len_ok(*output_len),
                    || q.clone(),
                )?;
                positive(&q, *tokens_per_second)?;
            }
            Quantity::CategoryShare {
                concurrency, share, ..
            } => {
                check(*concurrency >= 1, || q.clone())?;
                check((0.0..=1.0).contains(share), || q.clone())?;
            }
            Quantity::AllReduce {
                bytes,
                gpus,
                seconds,
            } => {
                check(*gpus >= 1, || q.clone())?;
                non_negative(&q, *bytes)?;
                time(&q, *seconds)?;
            }
            Quantity::Gemm {
                m, n, k, seconds, ..
            } => {
                check(*m >= 1 && *n >= 1 && *k >= 1, || q.clone())?;
                time(&q, *seconds)?;
            }
        }
    }
    Ok(())
}

/// A step's total is finite and positive and its parts finite and non-negative.
fn check_step(s: &StepCost, what: &str) -> Result<(), TestCaseError> {
    positive(&format!("{what}: total"), s.total)?;
    for x in s.breakdown.0 {
        non_negative(&format!("{what}: breakdown"), x)?;
    }
    for (o, _) in s.ops_with_counts() {
        for x in [o.flops, o.bytes, o.time, o.overhead] {
            non_negative(&format!("{what}: {}", o.name), x)?;
        }
    }
    Ok(())
}

/// Every number of a serialised record is finite (serde_json writes NaN/inf as null).
fn check_json(v: &serde_json::Value, path: &str) -> Result<(), TestCaseError> {
    match v {
        serde_json::Value::Null => {
            let key = path.rsplit('.').next().unwrap_or(path);
            check(common::ABSENT_BY_DESIGN.contains(&key), || {
                format!("{path} is null")
            })
        }
        serde_json::Value::Number(n) => finite(path, n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| check_json(x, &format!("{path}[{i}]"))),
        serde_json::Value::Object(o) => o
            .iter()
            .try_for_each(|(k, x)| check_json(x, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

fn check_gpu(g: &GpuSpec) -> Result<(), TestCaseError> {
    positive("memory_bandwidth", g.memory_bandwidth.0)?;
    positive("memory_capacity", g.memory_capacity.0)?;
    for p in [
        g.dense_peak.bf16,
        g.dense_peak.fp8,
        g.dense_peak.fp4,
        g.dense_peak.int8,
    ]
    .into_iter()
    .flatten()
    {
        positive("dense_peak", p.0)?;
    }
    for x in [g.boost_clock.map(|h| h.0), g.l2_cache.map(|b| b.0)]
        .into_iter()
        .flatten()
    {
        non_negative("clock/cache", x)?;
    }
    Ok(())
}

fn check_link(l: &InterconnectSpec) -> Result<(), TestCaseError> {
    positive("bandwidth_per_direction", l.bandwidth_per_direction.0)?;
    positive("p2p_bandwidth", l.p2p_bandwidth.0)?;
    if let Some(c) = l.cross_socket_bandwidth {
        positive("cross_socket_bandwidth", c.0)?;
    }
    non_negative("p2p_latency", l.p2p_latency.0)?;
    if let Some(s) = l.staged_latency {
        non_negative("staged_latency", s.0)?;
    }
    for a in [l.nccl_base_latency, l.nccl_step_latency] {
        for p in [a.ring, a.tree] {
            for x in [p.ll, p.ll128, p.simple] {
                non_negative("nccl latency", x.0)?;
            }
        }
    }
    Ok(())
}

fn check_system_spec(s: &SystemSpec, e: Option<&EngineSpec>) -> Result<(), TestCaseError> {
    let inline = match &s.engine {
        EngineRef::Inline(e) => Some(&**e),
        EngineRef::Name(_) => None,
    };
    let Some(e) = e.or(inline) else {
        return check_efficiencies(s);
    };
    for (w, x) in [
        ("custom_allreduce_max", e.custom_allreduce_max.0),
        ("one_shot_max", e.one_shot_max.0),
        ("kernel_gap", e.kernel_gap.0),
        ("kernel_launch", e.kernel_launch.0),
        ("step_overhead", e.step_overhead.0),
        ("activation_reserve", e.activation_reserve.0),
    ] {
        non_negative(w, x)?;
    }
    let u = e.gpu_memory_utilization.0;
    check(u > 0.0 && u <= 1.0, || format!("fraction {u}"))?;
    check_efficiencies(s)
}

fn check_efficiencies(s: &SystemSpec) -> Result<(), TestCaseError> {
    let f = &s.efficiency;
    for x in [
        f.memory.0,
        f.attention.0,
        f.link.0,
        f.gemm.bf16.0,
        f.gemm.fp8.0,
        f.gemm.int8.0,
        f.gemm.int4.0,
        f.gemm.nvfp4.0,
        f.gemm.mxfp4.0,
    ] {
        check(x > 0.0 && x <= 1.0, || format!("fraction {x}"))?;
    }
    // The bare-number key is refused; an accepted system has none.
    check(s.price_per_gpu_hour_usd.is_none(), || {
        "price_per_gpu_hour_usd accepted".to_string()
    })?;
    if let Some(p) = s.price_per_gpu_hour {
        non_negative("price", p.0)?;
    }
    Ok(())
}

fn check_model_spec(m: &ModelSpec) -> Result<(), TestCaseError> {
    for x in [m.published_total_params, m.published_active_params]
        .into_iter()
        .flatten()
    {
        non_negative("published params", x)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Built-ins used to evaluate what a reader returns
// ---------------------------------------------------------------------------------------

fn h200_system() -> &'static System {
    static S: OnceLock<System> = OnceLock::new();
    S.get_or_init(|| System::load("8x-h200-nvlink").unwrap())
}

fn pcie_system() -> &'static System {
    static S: OnceLock<System> = OnceLock::new();
    S.get_or_init(|| System::load("8x-rtx-pro-6000-pcie").unwrap())
}

fn llama8b() -> &'static ModelSpec {
    static M: OnceLock<ModelSpec> = OnceLock::new();
    M.get_or_init(|| load_model("llama-3.1-8b").unwrap())
}

fn deepseek() -> &'static ModelSpec {
    static M: OnceLock<ModelSpec> = OnceLock::new();
    M.get_or_init(|| load_model("deepseek-v3-fp8").unwrap())
}

/// The largest TP (a power of two up to the system's GPUs) the model accepts.
fn layout(m: &ModelSpec, s: &System) -> Option<Parallel> {
    let mut tp = s
        .spec
        .gpu_count
        .checked_next_power_of_two()
        .unwrap_or(1 << 16)
        .min(1 << 16);
    while tp > 0 {
        let p = Parallel::tp(tp);
        if p.validate(m, s).is_ok() {
            return Some(p);
        }
        tp /= 2;
    }
    None
}

/// Evaluate a model on a system under a few layouts: decode, predict record, a short sweep.
fn evaluate(m: &ModelSpec, s: &System) -> Result<(), TestCaseError> {
    let Some(tp) = layout(m, s) else {
        return Ok(());
    };
    let mut layouts = vec![tp];
    if m.config.num_hidden_layers >= 3 && s.spec.gpu_count >= 3 {
        layouts.push(Parallel {
            pp: 3,
            ..Parallel::tp(1)
        });
    }
    for par in layouts {
        for params in [CostParams::default_for(s), CostParams::speed_of_light()] {
            let ev = Evaluator::new(m, s, par, params).map_err(|e| {
                TestCaseError::fail(format!(
                    "layout {par} validated but the evaluator refused: {e}"
                ))
            })?;
            for pass in [
                Pass::decode(1.0, 0.0),
                Pass::decode(64.0, 4096.0),
                Pass::prefill(1.0, 1024.0, 0.0),
            ] {
                check_step(&ev.evaluate(&pass), &format!("{par} {pass:?}"))?;
            }
        }
        let sc = Scenario::new(m, s, par).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p = predict(&sc, 8, 1024).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_json(&serde_json::to_value(&p).unwrap(), "predict")?;
        let w = Workload {
            input_len: 256,
            output_len: 64,
            tpot_def: TpotDef::Itl,
            client: Default::default(),
        };
        match sweep(&sc, &[1, 64], w) {
            Ok(r) => check_json(&serde_json::to_value(&r).unwrap(), "sweep")?,
            // A configuration that cannot run is refused with its reason, never given a number.
            Err(e) if e.to_string().starts_with("does not fit:") => {}
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------

/// A scratch file per target, rewritten for each case, so descriptions go through the same
/// path-loading code as a user's file.
fn scratch(name: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .join(name)
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn description_target(long: bool, kind: &'static str) {
    let (dir, file) = match kind {
        "gpu" => ("configs/gpus", "fuzz-gpu.toml"),
        "interconnect" => ("configs/interconnects", "fuzz-link.toml"),
        "system" => ("configs/systems", "fuzz-system.toml"),
        _ => ("configs/models", "fuzz-model.toml"),
    };
    let mut fixtures = files(dir, &[".toml"]);
    if kind == "model" {
        fixtures.extend(files("tests/fixtures/bad", &["model-malformed.toml"]));
    }
    let path = scratch(file);
    let label = path.display().to_string();
    fuzz(&format!("{kind}-toml"), long, input(), |i| {
        let text = render(&i, &fixtures, Tree::Toml);
        write(&path, &text);
        let label = label.as_str();
        on_input(
            &text,
            (|| match kind {
                "gpu" => match no_panic("load_gpu", || load_gpu(label))? {
                    Err(e) => check_error(&e, label, &text),
                    Ok(g) => {
                        accepted();
                        check_gpu(&g)?;
                        let mut s = h200_system().clone();
                        s.gpu = g;
                        no_panic("evaluate", || evaluate(llama8b(), &s))??;
                        no_panic("evaluate", || evaluate(deepseek(), &s))?
                    }
                },
                "interconnect" => match no_panic("load_interconnect", || load_interconnect(label))?
                {
                    Err(e) => check_error(&e, label, &text),
                    Ok(l) => {
                        accepted();
                        check_link(&l)?;
                        for base in [h200_system(), pcie_system()] {
                            let mut s = base.clone();
                            s.link = l.clone();
                            no_panic("evaluate", || evaluate(llama8b(), &s))??;
                        }
                        Ok(())
                    }
                },
                "system" => match no_panic("load_system_spec", || load_system_spec(label))? {
                    Err(e) => check_error(&e, label, &text),
                    Ok(spec) => {
                        accepted();
                        check_system_spec(&spec, None)?;
                        // Evaluate with the built-in parts it names, when they are built-ins.
                        let mut s = h200_system().clone();
                        if let Ok(g) = load_gpu(&spec.gpu) {
                            s.gpu = g;
                        }
                        if let Ok(l) = load_interconnect(&spec.interconnect) {
                            s.link = l;
                        }
                        if let EngineRef::Inline(e) = &spec.engine {
                            s.engine = (**e).clone();
                        }
                        s.spec = spec;
                        no_panic("evaluate", || evaluate(llama8b(), &s))??;
                        no_panic("evaluate", || evaluate(deepseek(), &s))?
                    }
                },
                _ => match no_panic("load_model", || load_model(label))? {
                    Err(e) => check_error(&e, label, &text),
                    Ok(m) => {
                        accepted();
                        check_model_spec(&m)?;
                        no_panic("evaluate", || evaluate(&m, h200_system()))?
                    }
                },
            })(),
        )
    });
}

fn measured_target(long: bool, name: &str, format: FileFormat, fixtures: Vec<String>, tree: Tree) {
    let label = format!("fuzz/{name}");
    fuzz(
        name,
        long,
        (input(), any::<Option<u32>>(), any::<Option<u32>>()),
        |(i, gpus, conc)| {
            let text = render(&i, &fixtures, tree);
            let opts = ReadOptions {
                format: Some(format),
                gpus,
                concurrency: conc,
            };
            let r = no_panic(name, || parse_text(&text, &label, format, &opts))?;
            on_input(
                &text,
                match r {
                    Err(e) => check_error(&e, &label, &text),
                    Ok(set) => {
                        accepted();
                        check_measured(&set, &label, &text)
                    }
                },
            )
        },
    );
}

fn macro_log(long: bool) {
    let f = measured(&["k25b6000bench1_macro.log", "macro_bad_trial.log"]);
    let mut f = f;
    f.push(
        "Testing max_tokens=32...\n  Trial 1: 0.407s, 32 tokens\nMULTI-CONCURRENCY\n  \
         Concurrency 64: 128 requests in 6.1s, 1342.5 tok/s\nTesting concurrency=128...\n  \
         Throughput: 1536.2 tok/s\n  C=256: tok/s=1530\n"
            .into(),
    );
    measured_target(long, "macro-log", FileFormat::MacroLog, f, Tree::None);
}

fn vllm_json(long: bool) {
    let f = measured(&[
        "vllm_c8.json",
        "vllm_sweep.jsonl",
        "vllm_missing_field.jsonl",
    ]);
    measured_target(long, "vllm-json", FileFormat::VllmJson, f, Tree::Json);
}

fn nccl(long: bool) {
    let f = measured(&[
        "nccl_all_reduce_8gpu.log",
        "nccl_no_gpu_count.log",
        "nccl_short_row.log",
    ]);
    measured_target(long, "nccl", FileFormat::Nccl, f, Tree::None);
}

fn gemm_csv(long: bool) {
    let f = measured(&["gemm_decode.csv", "gemm_missing_column.csv"]);
    measured_target(long, "gemm-csv", FileFormat::GemmCsv, f, Tree::None);
}

fn trace(long: bool) {
    let f = measured(&["decode.pt.trace.json"]);
    measured_target(long, "trace", FileFormat::Trace, f, Tree::Json);
}

fn measurement_toml(long: bool) {
    let mut f = measured(&["measurement.toml"]);
    f.extend(files("configs/measured", &[".toml"]));
    measured_target(long, "measurement-toml", FileFormat::Toml, f, Tree::Toml);
}

fn calibration(long: bool) {
    let fixtures = files("tests/fixtures/calibration", &[".toml"]);
    let path = scratch("fuzz-calibration.toml");
    let label = path.display().to_string();
    let model = load_model("kimi-k2.5-int4").unwrap();
    let system = pcie_system();
    fuzz("calibration", long, input(), |i| {
        let text = render(&i, &fixtures, Tree::Toml);
        write(&path, &text);
        let r = no_panic("Calibration::load", || Calibration::load(&label))?;
        on_input(
            &text,
            (|| match r {
                Err(e) => check_error(&e, &label, &text),
                Ok(c) => {
                    accepted();
                    let mut sc = Scenario::new(&model, system, Parallel::tp(8)).unwrap();
                    sc.params = c.params(&CostParams::default_for(system));
                    let (lo, hi) = no_panic("interval", || {
                        c.interval(&CostParams::default_for(system), |p| {
                            let s = Scenario {
                                params: *p,
                                ..sc.clone()
                            };
                            predict(&s, 8, 1024).map(|r| r.tpot_ms).unwrap_or(f64::NAN)
                        })
                    })?;
                    finite("interval low", lo)?;
                    finite("interval high", hi)?;
                    let p = no_panic("predict", || predict(&sc, 8, 1024))?
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    check_json(&serde_json::to_value(&p).unwrap(), "predict")?;
                    positive("tpot", p.tpot_ms)
                }
            })(),
        )
    });
}

/// `--set` keys: real ones, near misses and nonsense.
const SET_KEYS: &[&str] = &[
    "gpu.memory_bandwidth",
    "gpu.memory_capacity",
    "gpu.dense_peak.bf16",
    "gpu.dense_peak.fp8",
    "gpu.dense_peak.fp4",
    "gpu.dense_peak",
    "gpu.name",
    "gpu.sources",
    "interconnect.bandwidth",
    "link.p2p_bandwidth",
    "link.cross_socket_bandwidth",
    "interconnect.p2p_latency",
    "interconnect.staged_latency",
    "interconnect.nccl_base_latency.ring.ll",
    "interconnect.nccl_step_latency.tree",
    "interconnect.kind",
    "system.gpu_count",
    "system.gpu",
    "system.interconnect",
    "system.topology",
    "system.sockets",
    "system.p2p",
    "system.cuda_graphs",
    "system.allreduce",
    "system.nccl_protocol",
    "engine.kernel_gap",
    "engine.kernel_launch",
    "engine.step_overhead",
    "engine.max_num_seqs",
    "engine.max_num_batched_tokens",
    "engine.gpu_memory_utilization",
    "engine.custom_allreduce_max",
    "engine.one_shot_max",
    "engine.unfused_dequant",
    "engine.activation_reserve",
    "efficiency.memory",
    "efficiency.gemm.bf16",
    "efficiency.gemm.fp8",
    "efficiency.gemm",
    "efficiency.link",
    "efficiency.attention",
    "system.price_per_gpu_hour_usd",
    "system.price_per_gpu_hour",
    "system.capital_per_gpu",
    "system.amortisation",
    "system.electricity",
    "gpu.power_limit",
    "model.config.num_hidden_layers",
    "model.config.hidden_size",
    "model.config.num_attention_heads",
    "model.config.num_key_value_heads",
    "model.config.head_dim",
    "model.config.n_routed_experts",
    "model.config.num_experts_per_tok",
    "model.config.n_shared_experts",
    "model.config.sliding_window",
    "model.config.layer_types",
    "model.config.index_topk",
    "model.config.index_n_heads",
    "model.config.index_head_dim",
    "model.config.kv_lora_rank",
    "model.config.q_lora_rank",
    "model.config.qk_rope_head_dim",
    "model.config.v_head_dim",
    "model.config.vocab_size",
    "model.config.intermediate_size",
    "model.config.moe_intermediate_size",
    "model.config.first_k_dense_replace",
    "model.config.num_nextn_predict_layers",
    "model.quantization.default",
    "model.quantization.routed_experts",
    "model.quantization.kv_cache",
    "model.quantization.attention",
    "model.eagle_head.num_layers",
    "model.eagle_head.intermediate_size",
    "model.published_total_params",
    "gpu",
    "system",
    "model",
    "engine",
    "gpu..x",
    "model.config",
    ".",
    "",
    "model.config.x.y",
    "system.engine.x",
];

/// `--set` values: numbers with and without units, quoted or not, names, paths, literals.
fn set_value() -> impl Strategy<Value = String> {
    let n = || (0..NUMBERS.len()).prop_map(|i| NUMBERS[i].to_string());
    let u = || (0..UNITS.len()).prop_map(|i| UNITS[i].to_string());
    prop_oneof![
        n(),
        (n(), u()).prop_map(|(n, u)| format!("{n} {u}")),
        (n(), u()).prop_map(|(n, u)| format!("\"{n} {u}\"")),
        prop_oneof![
            Just("true"),
            Just("false"),
            Just("[]"),
            Just("{}"),
            Just("nvlink5"),
            Just("h200"),
            Just("pcie-gen5-x16"),
            Just("/dev/null"),
            Just("configs/gpus/h200.toml"),
            Just("\"\""),
            Just("'x'"),
            Just("[\"fp8\"]"),
            Just("nvfp4"),
            Just("int4-g0"),
            Just("fp8"),
            Just("nvswitch"),
            Just("custom"),
            Just("[\"sliding_attention\"]"),
            Just("{ bf16 = 0.5 }"),
            Just("0.5\nx = 1"),
            Just("1 # c"),
        ]
        .prop_map(String::from),
        "\\PC{0,30}",
    ]
}

fn overrides(long: bool) {
    let strategy = prop_oneof![
        4 => (
            proptest::collection::vec(
                ((0..SET_KEYS.len()).prop_map(|i| SET_KEYS[i]), set_value())
                    .prop_map(|(k, v)| format!("{k}={v}")),
                1..4,
            ),
            0u8..3,
        ),
        1 => (proptest::collection::vec("\\PC{0,40}", 1..3), 0u8..3),
    ];
    fuzz("set-overrides", long, strategy, |(sets, which)| {
        // Parse each alone: a bad one must be an error mentioning --set, never a panic.
        for s in &sets {
            if let Err(e) = no_panic("Override::from_str", || s.parse::<Override>())? {
                let msg = e.to_string();
                check(msg.contains("--set"), || {
                    format!("error without --set: {msg}")
                })?;
            }
        }
        let (model, system) = match which {
            0 => ("llama-3.1-8b", "8x-h200-nvlink"),
            1 => ("deepseek-v3-fp8", "8x-h200-nvlink"),
            _ => ("kimi-k2.5-int4", "8x-rtx-pro-6000-pcie"),
        };
        let args = ScenarioArgs {
            model: model.into(),
            system: system.into(),
            engine: None,
            tp: None,
            ep: None,
            pp: None,
            dp: None,
            redundant_experts: None,
            calibration: None,
            transfer_calibration: false,
            set: sets.clone(),
        };
        let r = no_panic("commands::load", || commands::load(&args))?;
        on_input(
            &sets.join("\n"),
            (|| match r {
                Err(e) => check(!e.to_string().trim().is_empty(), || "empty error".into()),
                Ok(l) => {
                    accepted();
                    check_gpu(&l.system.gpu)?;
                    check_link(&l.system.link)?;
                    check_system_spec(&l.system.spec, Some(&l.system.engine))?;
                    check_model_spec(&l.model)?;
                    let sc = l
                        .scenario()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let p = no_panic("predict", || predict(&sc, 8, 1024))?
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    check_json(&serde_json::to_value(&p).unwrap(), "predict")?;
                    no_panic("evaluate", || evaluate(&l.model, &l.system))?
                }
            })(),
        )
    });
}

fn import_hf_target(long: bool) {
    let dir = root().join("tests/fixtures/hf");
    let mut configs: Vec<String> = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").is_file())
        .collect();
    names.sort();
    for n in &names {
        configs.push(std::fs::read_to_string(n.join("config.json")).unwrap());
    }
    let quants =
        vec![std::fs::read_to_string(dir.join("glm-5-nvfp4/hf_quant_config.json")).unwrap()];
    let label = "fuzz/config.json";
    let qlabel = "fuzz/hf_quant_config.json";
    fuzz(
        "import-hf",
        long,
        (input(), proptest::option::of(input())),
        |(i, q)| {
            let text = render(&i, &configs, Tree::Json);
            let quant = q.map(|q| render(&q, &quants, Tree::Json));
            let r = no_panic("import_hf::import", || {
                import_hf::import(
                    &text,
                    label,
                    quant.as_deref().map(|q| (q, qlabel)),
                    Some("fuzz"),
                )
            })?;
            let shown = format!(
                "{text}\n--- quant ---\n{}",
                quant.as_deref().unwrap_or("(none)")
            );
            on_input(
                &shown,
                (|| match r {
                    Err(e) => {
                        let msg = e.to_string();
                        check(msg.starts_with(label) || msg.starts_with(qlabel), || {
                            format!("error names neither file: {msg}")
                        })
                    }
                    Ok(imp) => {
                        accepted();
                        check(imp.model.validate().is_ok(), || {
                            format!(
                                "imported model does not validate: {:?}",
                                imp.model.validate()
                            )
                        })?;
                        check_model_spec(&imp.model)?;
                        let back: ModelSpec = registry::parse_toml(&imp.toml, "imported.toml")
                            .map_err(|e| {
                                TestCaseError::fail(format!("TOML does not read back: {e}"))
                            })?;
                        check(back == imp.model, || {
                            "TOML reads back to a different model".into()
                        })?;
                        no_panic("evaluate", || evaluate(&imp.model, h200_system()))?
                    }
                })(),
            )
        },
    );
}

fn units(long: bool) {
    let strategy = prop_oneof![
        "\\PC{0,30}",
        (
            (0..NUMBERS.len()).prop_map(|i| NUMBERS[i]),
            "[ \t]{0,2}",
            (0..UNITS.len()).prop_map(|i| UNITS[i]),
        )
            .prop_map(|(n, s, u)| format!("{n}{s}{u}")),
        "[0-9eE.+_-]{0,12} ?[A-Za-zµ/%]{0,8}",
    ];
    fuzz("units", long, strategy, |s| {
        let results = no_panic("units", || {
            [
                Bytes::parse(&s).map(|x| x.0),
                Seconds::parse(&s).map(|x| x.0),
                BytesPerSec::parse(&s).map(|x| x.0),
                FlopsPerSec::parse(&s).map(|x| x.0),
                Hertz::parse(&s).map(|x| x.0),
            ]
        })?;
        if results.iter().any(Result::is_ok) {
            accepted();
        }
        for r in results {
            match r {
                Ok(v) => non_negative(&format!("{s:?}"), v)?,
                Err(e) => check(!e.message.is_empty(), || "empty unit error".into())?,
            }
        }
        // Fractions in a TOML file, and the other small parsers of user text.
        let toml = format!("f = {s}");
        #[derive(serde::Deserialize)]
        struct F {
            #[allow(dead_code)]
            f: rooftop::units::Fraction,
        }
        if let Ok(Ok(f)) = no_panic("Fraction", || toml::from_str::<F>(&toml)) {
            check(f.f.0 > 0.0 && f.f.0 <= 1.0, || {
                format!("fraction {:?} from {s:?}", f.f.0)
            })?;
        }
        no_panic("WeightFormat", || s.parse::<WeightFormat>())?.ok();
        if let Ok(p) = no_panic("Parallel", || s.parse::<Parallel>())? {
            check(p.tp >= 1 && p.ep >= 1 && p.pp >= 1 && p.dp >= 1, || {
                format!("{p:?}")
            })?;
        }
        Ok(())
    });
}

fn acceptance(long: bool) {
    let strategy = proptest::collection::vec(prop_oneof![8 => 0u32..16, 1 => any::<u32>()], 0..64);
    fuzz(
        "acceptance-lengths",
        long,
        strategy,
        |lengths| match no_panic("Acceptance::from_lengths", || {
            Acceptance::from_lengths(&lengths)
        })? {
            Err(e) => check(!e.to_string().is_empty(), || "empty error".into()),
            Ok(a) => {
                accepted();
                for p in &a.0 {
                    check((0.0..=1.0).contains(p), || format!("rate {p}"))?;
                }
                finite("expected tokens", a.expected_tokens(16))
            }
        },
    );
}

/// The CLI's own value parsers (ranges, layouts, durations, systems with overrides, counts):
/// never a panic, never more values than the bound, every value within its flag's range,
/// and a refusal always says what was expected. Inputs mix the grammar's pieces with noise.
fn cli_values(long: bool) {
    use rooftop::options::{
        parse_values, positive_u32, DraftLengths, Duration as Dur, Positive, Systems, MAX_VALUES,
    };
    let piece = prop_oneof![
        Just("..".to_string()),
        Just(":".to_string()),
        Just(":x".to_string()),
        Just(",".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(";".to_string()),
        Just("=".to_string()),
        Just("tp".to_string()),
        Just("ep".to_string()),
        Just("pp".to_string()),
        Just("dp".to_string()),
        Just("ms".to_string()),
        Just("e-3".to_string()),
        Just("8x-h200-nvlink".to_string()),
        Just("gpu.memory_bandwidth=\"2 TB/s\"".to_string()),
        Just("system.interconnect=nvlink5".to_string()),
        Just("label=x".to_string()),
        (0u64..=70).prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        prop_oneof![Just(1.5f64), Just(2.0), Just(1.0), Just(1e-9), Just(1e308)]
            .prop_map(|v| v.to_string()),
        "[ -~]{0,6}",
    ];
    let strategy = proptest::collection::vec(piece, 0..10).prop_map(|v| v.concat());
    fuzz("cli-values", long, strategy, |s| {
        let expected = |e: &str| {
            check(e.contains("expected") || e.contains("must be"), || {
                format!("{s:?}: a refusal that does not say what was expected: {e}")
            })
        };
        match no_panic("parse_values", || parse_values(&s))? {
            Ok(v) => {
                accepted();
                check(!v.is_empty() && v.len() as u64 <= MAX_VALUES, || {
                    format!("{s:?}: {} values", v.len())
                })?;
            }
            Err(e) => expected(&e)?,
        }
        match no_panic("Positive", || s.parse::<Positive>())? {
            Ok(v) => check(v.0.iter().all(|x| *x >= 1), || {
                format!("{s:?}: zero in {v:?}")
            })?,
            Err(e) => expected(&e)?,
        }
        match no_panic("DraftLengths", || s.parse::<DraftLengths>())? {
            Ok(v) => check(v.0.iter().all(|k| (1..=64).contains(k)), || {
                format!("{s:?}: {v:?}")
            })?,
            Err(e) => expected(&e)?,
        }
        match no_panic("Parallel", || s.parse::<Parallel>())? {
            Ok(p) => check(p.tp >= 1 && p.ep >= 1 && p.pp >= 1 && p.dp >= 1, || {
                format!("{s:?}: {p:?}")
            })?,
            Err(e) => expected(&e)?,
        }
        match no_panic("Duration", || s.parse::<Dur>())? {
            Ok(d) => check(d.0 .0.is_finite() && d.0 .0 > 0.0, || {
                format!("{s:?}: {d:?}")
            })?,
            Err(e) => expected(&e)?,
        }
        match no_panic("positive_u32", || positive_u32(&s))? {
            Ok(v) => check(v >= 1, || format!("{s:?}: {v}"))?,
            Err(e) => expected(&e)?,
        }
        if let Ok(sys) = no_panic("Systems", || s.parse::<Systems>())? {
            check(!sys.0.is_empty(), || format!("{s:?}: no systems"))?;
            for v in &sys.0 {
                // Loading a variant either works or says why; never a panic.
                let r = no_panic("load_variant", || {
                    rooftop::whatif::load_variant(v, None, &[])
                })?;
                if let Err(e) = r {
                    check(!e.to_string().is_empty(), || "empty error".into())?;
                }
            }
        }
        Ok(())
    });
}

macro_rules! targets {
    ($($fast:ident, $long:ident => $body:expr;)*) => {
        $(
            #[test]
            fn $fast() {
                let run: fn(bool) = $body;
                run(false);
            }

            #[test]
            #[ignore = "long fuzz run: cargo test --release --test fuzz_readers -- --ignored"]
            fn $long() {
                let run: fn(bool) = $body;
                run(true);
            }
        )*
    };
}

targets! {
    gpu_toml, long_gpu_toml => |l| description_target(l, "gpu");
    interconnect_toml, long_interconnect_toml => |l| description_target(l, "interconnect");
    system_toml, long_system_toml => |l| description_target(l, "system");
    model_toml, long_model_toml => |l| description_target(l, "model");
    macro_log_reader, long_macro_log_reader => macro_log;
    vllm_json_reader, long_vllm_json_reader => vllm_json;
    nccl_reader, long_nccl_reader => nccl;
    gemm_csv_reader, long_gemm_csv_reader => gemm_csv;
    trace_reader, long_trace_reader => trace;
    measurement_toml_reader, long_measurement_toml_reader => measurement_toml;
    calibration_file, long_calibration_file => calibration;
    set_overrides, long_set_overrides => overrides;
    import_hf_config, long_import_hf_config => import_hf_target;
    unit_strings, long_unit_strings => units;
    acceptance_lengths, long_acceptance_lengths => acceptance;
    cli_value_parsers, long_cli_value_parsers => cli_values;
}
