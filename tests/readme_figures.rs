//! The README's figures stay true: every number it quotes about the model comes from a
//! command this test runs, and the test fails when the two drift apart.
//!
//! Two kinds of claim are checked:
//! - the block that `cargo run --release` prints (the README quotes it as the output of
//!   `rooftop validate`): every quoted line must be a line of that output;
//! - prose figures, each paragraph followed by a marker naming the command its numbers come
//!   from and the output text that holds them:
//!   `<!-- figures: rooftop ARGS => "output text"; "more output text" -->`.
//!   The prose rounds; the marker quotes the output as printed (runs of spaces collapsed).
//!
//! The kernel-table figures are checked beside the medians they quote, in
//! `tests/kernel_tables.rs`; the speed figures come from `cargo bench`, which tests do not
//! run.

use assert_cmd::Command;
use std::collections::BTreeMap;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

/// Runs of whitespace as one space, ends trimmed.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// stdout and stderr of `rooftop args`, run from the checkout.
fn run(args: &[String]) -> String {
    let out = Command::cargo_bin("rooftop")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`rooftop {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// (command arguments after `rooftop`, quoted output texts) of every figures marker.
fn markers(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<!-- figures:") {
        let body_start = i + "<!-- figures:".len();
        let end = rest[body_start..]
            .find("-->")
            .expect("a figures marker is closed by -->")
            + body_start;
        let body = &rest[body_start..end];
        let (cmd, quoted) = body
            .split_once("=>")
            .unwrap_or_else(|| panic!("figures marker without `=>`: {body}"));
        let mut words = cmd.split_whitespace().map(String::from);
        assert_eq!(
            words.next().as_deref(),
            Some("rooftop"),
            "a figures marker names a rooftop command: {cmd}"
        );
        let texts: Vec<String> = quoted.split('"').skip(1).step_by(2).map(squash).collect();
        assert!(!texts.is_empty(), "figures marker quotes nothing: {body}");
        out.push((words.collect(), texts));
        rest = &rest[end..];
    }
    out
}

#[test]
fn prose_figures_match_the_commands_they_come_from() {
    let text = readme();
    let ms = markers(&text);
    assert!(
        ms.len() >= 4,
        "the README's model figures carry markers ({} found)",
        ms.len()
    );
    let mut outputs: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut missing = Vec::new();
    for (args, texts) in ms {
        let out = outputs
            .entry(args.clone())
            .or_insert_with(|| squash(&run(&args)));
        for t in texts {
            if !out.contains(&t) {
                missing.push(format!(
                    "`rooftop {}` no longer prints \"{t}\"",
                    args.join(" ")
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README figures out of date:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_default_run_block_is_what_validate_prints() {
    let text = readme();
    let intro = "`cargo run --release` (the same as `rooftop validate` plus the charts) prints";
    let at = text.find(intro).expect("the README quotes the default run");
    let fence = text[at..].find("```\n").expect("a code block") + at + 4;
    let end = text[fence..].find("```").expect("a closed code block") + fence;
    let quoted: Vec<&str> = text[fence..end]
        .lines()
        .filter(|l| !l.trim().is_empty() && l.trim() != "...")
        .collect();
    assert!(quoted.len() >= 5, "{quoted:?}");
    let out = run(&["validate".into()]);
    let lines: Vec<String> = out.lines().map(squash).collect();
    let stale: Vec<&str> = quoted
        .iter()
        .copied()
        .filter(|q| !lines.contains(&squash(q)))
        .collect();
    assert!(
        stale.is_empty(),
        "README's default-run lines that `rooftop validate` no longer prints:\n{}\n\nit prints:\n{out}",
        stale.join("\n")
    );
}

#[test]
fn markers_are_read_as_written() {
    let m = markers(
        "x <!-- figures: rooftop predict --batch 1 => \"TPOT (default)   13.092 ms\"; \"a\" --> y",
    );
    assert_eq!(
        m,
        vec![(
            vec!["predict".to_string(), "--batch".into(), "1".into()],
            vec!["TPOT (default) 13.092 ms".to_string(), "a".into()]
        )]
    );
}
