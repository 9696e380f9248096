//! `rooftop specdec`: speculative-decoding gains per draft length and concurrency.

use crate::cli::ScenarioArgs;
use crate::commands::load;
use crate::cost::Parallel;
use crate::error::{Error, Result};
use crate::export::{self, table, Format};
use crate::spec::registry;
use crate::specdec::{specdec, Acceptance, Draft, SpecDec};
use std::fmt::Write as _;
use std::path::Path;

/// `1..8` (inclusive), `1..8:2`, or a list `1,2,4`.
pub fn parse_range(s: &str, what: &str) -> Result<Vec<u32>> {
    let bad = || {
        Error::Scenario(format!(
            "--{what} \"{s}\": expected a range such as 1..8 (or 1..8:2) or a list such as 1,2,4"
        ))
    };
    let s = s.trim();
    if let Some((a, b)) = s.split_once("..") {
        let (b, step) = match b.split_once(':') {
            Some((b, st)) => (b, st.trim().parse::<u32>().map_err(|_| bad())?),
            None => (b, 1),
        };
        let a: u32 = a.trim().parse().map_err(|_| bad())?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        // Refused before it is collected: `1..4294967295` would be gigabytes of values.
        if step == 0 || a > b || b - a > 4096 {
            return Err(bad());
        }
        return Ok((a..=b).step_by(step as usize).collect());
    }
    s.split(',')
        .map(|x| x.trim().parse::<u32>().map_err(|_| bad()))
        .collect()
}

fn parse_acceptance(s: &str) -> Result<Acceptance> {
    let p = Path::new(s);
    if p.is_file() {
        let text = std::fs::read_to_string(p).map_err(|source| Error::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let mut lengths = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            for tok in line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
            {
                let v: u32 = tok.parse().map_err(|_| Error::Measured {
                    file: s.to_string(),
                    line: Some(i + 1),
                    message: format!(
                        "\"{tok}\" is not an accepted length (a whole number of draft tokens)"
                    ),
                })?;
                lengths.push(v);
            }
        }
        if lengths.is_empty() {
            return Err(Error::Measured {
                file: s.to_string(),
                line: None,
                message: "no accepted lengths in the file".into(),
            });
        }
        return Acceptance::from_lengths(&lengths).map_err(|e| Error::Measured {
            file: s.to_string(),
            line: None,
            message: e.to_string(),
        });
    }
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|_| Error::Scenario(format!("--acceptance \"{s}\": expected a rate such as 0.8, rates such as 0.85,0.6,0.4, or a file of accepted lengths"))))
        .collect::<Result<_>>()?;
    let a = Acceptance(v);
    a.validate()?;
    Ok(a)
}

pub fn parse_draft(
    s: &str,
    target_tp: u32,
    draft_tp: Option<u32>,
    ngram_cpu_us: f64,
) -> Result<Draft> {
    Ok(match s {
        "mtp" => Draft::Mtp,
        "eagle" | "eagle3" => Draft::Eagle,
        "ngram" => {
            if !(ngram_cpu_us.is_finite() && ngram_cpu_us >= 0.0) {
                return Err(Error::Scenario(
                    "--ngram-cpu-us must be zero or more".into(),
                ));
            }
            Draft::Ngram {
                cpu_seconds: ngram_cpu_us * 1e-6,
            }
        }
        _ => {
            let Some(name) = s.strip_prefix("model:") else {
                return Err(Error::Scenario(format!(
                    "--draft \"{s}\": expected mtp, eagle, ngram or model:NAME"
                )));
            };
            let spec = registry::load_model(name)?;
            let tp = match draft_tp {
                Some(t) => t,
                None => {
                    let mut t = target_tp;
                    while t > 1 && !spec.config.num_attention_heads.is_multiple_of(t) {
                        t /= 2;
                    }
                    t.max(1)
                }
            };
            Draft::Model {
                spec: Box::new(spec),
                tp,
            }
        }
    })
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    args: &ScenarioArgs,
    draft: &str,
    k: &str,
    acceptance: &str,
    concurrency: &[u32],
    context: u32,
    draft_tp: Option<u32>,
    ngram_cpu_us: f64,
    format: Format,
) -> Result<Vec<u8>> {
    let l = load(args)?;
    let s = l.scenario()?;
    let ks = parse_range(k, "k")?;
    if ks.is_empty() || ks.iter().any(|k| *k == 0 || *k > 64) {
        return Err(Error::Scenario("--k: draft lengths must be 1..64".into()));
    }
    if concurrency.is_empty() || concurrency.contains(&0) {
        return Err(Error::Scenario(
            "--concurrency needs positive integers".into(),
        ));
    }
    let d = parse_draft(draft, l.parallel.tp, draft_tp, ngram_cpu_us)?;
    if let Draft::Model { spec, tp } = &d {
        Parallel::tp(*tp).validate(spec, &l.system)?;
    }
    let a = parse_acceptance(acceptance)?;
    let r = specdec(&s, &d, &a, &ks, concurrency, context)?;
    export::export(&r, format, text)
}

fn text(r: &SpecDec) -> String {
    let mut o = String::new();
    let acc: Vec<String> = r.acceptance.0.iter().map(|p| format!("{p:.2}")).collect();
    let _ = writeln!(
        o,
        "{} on {} ({}), draft {}, acceptance per position {}, context {}, {} parameters",
        r.model,
        r.system,
        r.parallel,
        r.draft,
        acc.join(", "),
        r.context,
        r.provenance
    );
    for &(c, base) in &r.baseline_tpot_ms {
        let _ = writeln!(o);
        let fits = r
            .points
            .iter()
            .filter(|p| p.concurrency == c)
            .all(|p| p.kv_fits);
        let note = if fits {
            ""
        } else {
            " (this many sequences do not fit in the KV cache at this context: the point is hypothetical)"
        };
        let _ = writeln!(o, "C = {c}: plain decode {base:.2} ms/token{note}");
        let rows: Vec<Vec<String>> = r
            .points
            .iter()
            .filter(|p| p.concurrency == c)
            .map(|p| {
                vec![
                    p.k.to_string(),
                    format!("{:.2}", p.expected_tokens_per_step),
                    format!("{:.2}", p.draft_ms),
                    format!("{:.2}", p.verify_ms),
                    format!("{:.2}", p.tpot_ms),
                    format!("{:.0}", p.throughput_tok_s),
                    format!("{:.2}x", p.speedup),
                ]
            })
            .collect();
        o.push_str(&table(
            &[
                "k",
                "tokens/step",
                "draft ms",
                "verify ms",
                "TPOT ms",
                "tok/s",
                "speedup",
            ],
            &rows,
        ));
    }
    let _ = writeln!(o);
    for b in &r.best_k {
        if b.k == 0 {
            let _ = writeln!(
                o,
                "C = {}: no draft length pays; decode without speculation",
                b.concurrency
            );
        } else {
            let _ = writeln!(
                o,
                "C = {}: best k = {} ({:.2}x)",
                b.concurrency, b.k, b.speedup
            );
        }
    }
    o
}
