//! `rooftop specdec`: speculative-decoding gains per draft length and concurrency.

use crate::cli::{DraftArgs, SpecdecArgs};
use crate::commands::load;
use crate::cost::Parallel;
use crate::error::{Error, Result};
use crate::export::{self, table};
use crate::options::{AcceptanceArg, DraftKind};
use crate::spec::registry;
use crate::specdec::{specdec, Acceptance, Draft, SpecDec};
use std::fmt::Write as _;

/// n-gram lookup's CPU time per step when --ngram-cpu-us names none, microseconds: a prior
/// [U], measure yours.
const NGRAM_CPU_US_DEFAULT: f64 = 50.0;

/// The acceptance of figures given on the command line, converted from the statistic
/// `--acceptance-stat` names (a single figure at `--acceptance-k`, or the one `--k`). `None`
/// for a file, read later.
pub fn given_acceptance(a: &SpecdecArgs) -> Option<Result<Acceptance>> {
    if let (Some(k), false) = (a.acceptance_k, a.acceptance_stat.is_scalar()) {
        return Some(Err(Error::Usage(format!(
            "--acceptance-k {k} applies to a single figure (a length or a rate, \
             --acceptance-stat vllm-mean-length and the like); {} rates are per position",
            a.acceptance_stat.name()
        ))));
    }
    match &a.acceptance {
        AcceptanceArg::Values(v) => {
            let k = a
                .acceptance_k
                .or_else(|| (a.k.0.len() == 1).then(|| a.k.0[0]));
            Some(
                Acceptance::from_stat(a.acceptance_stat, v, k).and_then(|acc| {
                    acc.validate()?;
                    Ok(acc)
                }),
            )
        }
        AcceptanceArg::File(_) => None,
    }
}

/// The acceptance rates: converted from the figures given, or read from a file of accepted
/// lengths.
fn acceptance(args: &SpecdecArgs) -> Result<Acceptance> {
    let p = match (&args.acceptance, given_acceptance(args)) {
        (_, Some(acc)) => return acc,
        (AcceptanceArg::File(p), None) => p.as_path(),
        (AcceptanceArg::Values(_), None) => unreachable!("figures convert"),
    };
    let s = &p.display().to_string();
    let text = crate::files::read_text(p)?;
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
    Acceptance::from_lengths(&lengths).map_err(|e| Error::Measured {
        file: s.to_string(),
        line: None,
        message: e.to_string(),
    })
}

/// The draft of `--draft`, its model loaded and checked against the target of `l`: a
/// separate draft model must share the target's vocabulary (the target verifies its tokens)
/// and fit beside it in each GPU's memory.
pub fn draft(d: &DraftArgs, l: &crate::commands::Loaded) -> Result<Draft> {
    let target_tp = l.parallel.tp;
    // A head (MTP, EAGLE) runs inside the target with its tensor parallelism, and n-gram
    // lookup on the CPU: a draft TP asked for one would be ignored.
    if let (Some(t), false) = (d.draft_tp, matches!(d.draft, DraftKind::Model(_))) {
        return Err(Error::Usage(format!(
            "--draft-tp {t} applies to a separate draft model (--draft model:NAME); this draft \
             runs inside the target at its TP ({target_tp}) or on the CPU"
        )));
    }
    if let (Some(us), false) = (d.ngram_cpu_us, matches!(d.draft, DraftKind::Ngram)) {
        return Err(Error::Usage(format!(
            "--ngram-cpu-us {} applies to n-gram lookup (--draft ngram); this draft runs on \
             the GPU",
            us.0
        )));
    }
    Ok(match &d.draft {
        DraftKind::Mtp => Draft::Mtp,
        DraftKind::Eagle => Draft::Eagle,
        DraftKind::Eagle3 => Draft::Eagle3,
        DraftKind::Ngram => Draft::Ngram {
            cpu_seconds: d.ngram_cpu_us.map_or(NGRAM_CPU_US_DEFAULT, |u| u.0) * 1e-6,
        },
        DraftKind::Model(name) => {
            let spec = registry::load_model(name)?;
            let tp = match d.draft_tp {
                Some(t) => t,
                None => {
                    let mut t = target_tp;
                    while t > 1 && !spec.config.num_attention_heads.is_multiple_of(t) {
                        t /= 2;
                    }
                    t.max(1)
                }
            };
            Parallel::tp(tp).validate(&spec, &l.system).map_err(|e| {
                Error::Scenario(format!("draft model {name} at --draft-tp {tp}: {e}"))
            })?;
            check_draft_model(name, &spec, tp, l)?;
            Draft::Model {
                spec: Box::new(spec),
                tp,
            }
        }
    })
}

/// A draft model the target can use: the same vocabulary, and room for both sets of weights
/// plus the engine's reserve on every GPU.
fn check_draft_model(
    name: &str,
    spec: &crate::spec::ModelSpec,
    tp: u32,
    l: &crate::commands::Loaded,
) -> Result<()> {
    let (dv, tv) = (spec.config.vocab_size, l.model.config.vocab_size);
    if dv != tv {
        return Err(Error::Scenario(format!(
            "draft model {name} has a vocabulary of {dv} tokens, the target {} one of {tv}: \
             a draft must share the target's tokenizer, since the target verifies its tokens",
            l.model.name
        )));
    }
    use crate::cost::memory::weight_bytes_per_gpu;
    let target = weight_bytes_per_gpu(&l.model, &l.parallel);
    let draft = weight_bytes_per_gpu(spec, &Parallel::tp(tp));
    let eng = &l.system.engine;
    let usable = eng.usable_memory(l.system.gpu.memory_capacity.0);
    if eng.kv_budget(l.system.gpu.memory_capacity.0, target + draft) <= 0.0 {
        return Err(Error::Scenario(format!(
            "draft model {name} does not fit beside {}: {:.1} GB target weights + {:.1} GB draft \
             weights + {:.1} GB reserve per GPU exceed the {:.1} GB the engine may use on {}",
            l.model.name,
            target / 1e9,
            draft / 1e9,
            eng.activation_reserve.0 / 1e9,
            usable / 1e9,
            l.system.gpu.name
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn run(a: &SpecdecArgs) -> Result<Vec<u8>> {
    let SpecdecArgs {
        scenario: args,
        draft: draft_args,
        k: ks,
        concurrency,
        context,
        format,
        ..
    } = a;
    let (context, format) = (*context, *format);
    let l = load(args)?;
    let s = l.scenario()?;
    if concurrency.is_empty() || concurrency.contains(&0) {
        return Err(Error::Scenario(
            "--concurrency needs positive integers".into(),
        ));
    }
    let d = draft(draft_args, &l)?;
    let a = acceptance(a)?;
    let r = specdec(&s, &d, &a, &ks.0, concurrency, context)?;
    export::export(&r, format, text)
}

pub fn text(r: &SpecDec) -> String {
    let mut o = String::new();
    // A calibrated run's TPOT carries its 95 % interval, as sweep's and predict's do.
    let intervals = r.points.iter().any(|p| p.tpot_ci95_ms.is_some());
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
    // Concurrencies in order, each with its table or the reason it has none.
    let mut cs: Vec<(u32, std::result::Result<f64, &str>)> = r
        .baseline_tpot_ms
        .iter()
        .map(|&(c, base)| (c, Ok(base)))
        .chain(
            r.does_not_fit
                .iter()
                .map(|(c, why)| (*c, Err(why.as_str()))),
        )
        .collect();
    cs.sort_by_key(|(c, _)| *c);
    for (c, base) in cs {
        let _ = writeln!(o);
        let base = match base {
            Ok(b) => b,
            Err(why) => {
                let _ = writeln!(o, "C = {c}: {why}");
                continue;
            }
        };
        let point = r.points.iter().find(|p| p.concurrency == c);
        let running = point.map_or(c, |p| p.running);
        let plain_running = point.map_or(c, |p| p.plain_running);
        let held = match (running < c, plain_running < c) {
            (false, false) => String::new(),
            _ if running == plain_running => format!(
                " ({running} running, the rest wait: max_num_seqs, the KV cache or a calibration's in-flight cap)"
            ),
            _ => format!(
                " ({running} running with speculation, {plain_running} without, the rest wait: the engine's cap, the KV cache, the token budget or a calibration's in-flight cap)"
            ),
        };
        let _ = writeln!(o, "C = {c}{held}: plain decode {base:.2} ms/token");
        let rows: Vec<Vec<String>> = r
            .points
            .iter()
            .filter(|p| p.concurrency == c)
            .map(|p| {
                let mut row = vec![
                    p.k.to_string(),
                    format!("{:.2}", p.expected_tokens_per_step),
                    format!("{:.2}", p.draft_ms),
                    format!("{:.2}", p.verify_ms),
                    format!("{:.2}", p.tpot_ms),
                ];
                if intervals {
                    row.push(
                        p.tpot_ci95_ms
                            .map_or("-".into(), |[lo, hi]| format!("[{lo:.2}, {hi:.2}]")),
                    );
                }
                row.extend([
                    format!("{:.0}", p.throughput_tok_s),
                    format!("{:.2}x", p.speedup),
                ]);
                row
            })
            .collect();
        let mut head = vec!["k", "tokens/step", "draft ms", "verify ms", "TPOT ms"];
        if intervals {
            head.push("95 % ms");
        }
        head.extend(["tok/s", "speedup"]);
        o.push_str(&table(&head, &rows));
    }
    let _ = writeln!(o);
    for b in &r.breakeven {
        let again = |line: String| match b.pays_again_at {
            Some(a) => format!("{line}; pays again from C = {a}"),
            None => line,
        };
        let line = match (b.stops_at, b.crossing_concurrency, b.pays_again_at) {
            (None, _, _) => format!("k = {}: {}", b.k, b.why),
            (Some(c), Some(x), _) => again(format!(
                "k = {}: stops paying near C = {x:.0} (below 1x from C = {c}): {}",
                b.k, b.why
            )),
            (Some(c), None, Some(_)) => again(format!(
                "k = {}: below 1x from the smallest swept C ({c}): {}",
                b.k, b.why
            )),
            (Some(_), None, None) => {
                format!("k = {}: does not pay at any swept C: {}", b.k, b.why)
            }
        };
        let _ = writeln!(o, "{line}");
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
