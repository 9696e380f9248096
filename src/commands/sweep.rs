//! `rooftop sweep`: the serving curve against concurrency.

use crate::cli::{ServingArgs, SweepArgs};
use crate::commands::load;
use crate::error::{Error, Result};
use crate::export::{self, table};
use crate::serve::{sweep, Sweep, Workload};
use std::fmt::Write as _;

/// A request shape from `--input-len`, `--output-len` and a TPOT definition (`--tpot-def`
/// where the command offers it: only then does a refusal suggest it).
pub fn request_shape(
    input_len: u32,
    output_len: u32,
    tpot_def: crate::serve::TpotDef,
    offers_tpot_def: bool,
) -> Result<Workload> {
    if input_len == 0 || output_len == 0 {
        return Err(Error::Scenario(
            "--input-len and --output-len must be at least 1".into(),
        ));
    }
    if output_len == 1 && tpot_def == crate::serve::TpotDef::Itl {
        let ask = if offers_tpot_def {
            "ask for --tpot-def e2e (end-to-end time per token) or an output of at least 2 tokens"
        } else {
            "this command reports the inter-token latency: ask for an output of at least 2 tokens"
        };
        return Err(Error::Scenario(format!(
            "with --output-len 1 there is no second token, so no inter-token latency; {ask}"
        )));
    }
    Ok(Workload {
        input_len,
        output_len,
        tpot_def,
        client: Default::default(),
    })
}

/// The serving loop's view of `--client` (an ideal closed loop when none is given).
pub fn client_model(name: Option<&str>) -> Result<crate::serve::ClientModel> {
    Ok(match name {
        Some(n) => crate::spec::registry::load_client(n)?.model(),
        None => crate::serve::ClientModel::IDEAL,
    })
}

/// `--client` as it ran against `system`'s engine serving `model`: the settings its launch
/// scripts give that server included (`[[launch]]` in the client's description), set on
/// `system` and `model` in place (kernel libraries, KV-cache type, token budget).
pub fn client_launching(
    name: Option<&str>,
    system: &mut crate::spec::System,
    model: &mut crate::spec::ModelSpec,
) -> Result<crate::serve::ClientModel> {
    Ok(match name {
        Some(n) => launched(&crate::spec::registry::load_client(n)?, system, model),
        None => crate::serve::ClientModel::IDEAL,
    })
}

/// The client `spec` as it ran against `system` serving `model`, its launch settings set on
/// both ([`client_launching`] for a client given by name).
fn launched(
    spec: &crate::spec::client::ClientSpec,
    system: &mut crate::spec::System,
    model: &mut crate::spec::ModelSpec,
) -> crate::serve::ClientModel {
    if let Some(s) = spec.launched(system, model) {
        *system = s;
    }
    spec.launch_model(system, model);
    spec.model_for(system, model)
}

/// The serving workload of `a` against `system` serving `model`: the request shape, the
/// TPOT definition (--tpot-def, else the --client's own, a client description's `tpot`:
/// what its measurements mean by TPOT, else inter-token time) and the client as it ran
/// against that server ([`client_launching`]), its description read once.
pub fn workload(
    a: &ServingArgs,
    system: &mut crate::spec::System,
    model: &mut crate::spec::ModelSpec,
) -> Result<Workload> {
    if a.concurrency.is_empty() || a.concurrency.contains(&0) {
        return Err(Error::Scenario(
            "--concurrency needs positive integers, e.g. 1,2,4,8".into(),
        ));
    }
    let spec = a
        .client
        .as_deref()
        .map(crate::spec::registry::load_client)
        .transpose()?;
    let tpot_def = a
        .tpot_def
        .or(spec.as_ref().map(|c| c.tpot))
        .unwrap_or(crate::serve::TpotDef::Itl);
    let mut w = request_shape(a.request.input_len, a.request.output_len, tpot_def, true)?;
    if let Some(c) = &spec {
        w.client = launched(c, system, model);
    }
    Ok(w)
}

pub fn run(a: &SweepArgs) -> Result<Vec<u8>> {
    if a.deployment.asked()? {
        return crate::commands::deploy::run_sweep(a);
    }
    let (args, serving, format) = (&a.scenario, &a.serving, a.format);
    let mut l = load(args)?;
    let w = workload(serving, &mut l.system, &mut l.model)?;
    let s = l.scenario()?;
    let mut conc = serving.concurrency.clone();
    conc.sort_unstable();
    conc.dedup();
    let r = sweep(&s, &conc, w)?;
    export::export(&r, format, text)
}

pub fn text(r: &Sweep) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on {} ({}), input {} / output {} tokens, TPOT as {} ({}), {} parameters",
        r.model,
        r.system,
        r.parallel,
        r.input_len,
        r.output_len,
        r.tpot_def,
        r.tpot_def.meaning(),
        r.provenance
    );
    let _ = writeln!(o);
    // A calibrated sweep's TPOT carries its 95 % interval, as predict's does.
    let intervals = r.points.iter().any(|p| p.tpot_ci95_ms.is_some());
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            let mut top: Vec<(&&str, &f64)> =
                p.breakdown_ms.iter().filter(|(_, v)| **v > 0.0).collect();
            top.sort_by(|a, b| b.1.total_cmp(a.1));
            let top: Vec<String> = top
                .iter()
                .take(3)
                .map(|(k, v)| format!("{k} {:.0}%", 100.0 * **v / p.tpot_itl_ms))
                .collect();
            let mut row = vec![
                p.concurrency.to_string(),
                if p.queued > 0 {
                    format!("{} (+{} queued)", p.running, p.queued)
                } else {
                    p.running.to_string()
                },
                format!("{:.2}", p.tpot_ms),
            ];
            if intervals {
                row.push(
                    p.tpot_ci95_ms
                        .map_or("-".into(), |[lo, hi]| format!("[{lo:.2}, {hi:.2}]")),
                );
            }
            row.extend([
                format!("{:.2}", p.sol_tpot_ms),
                format!("{:.0}", p.ttft_ms),
                format!("{:.0}", p.throughput_tok_s),
                p.watts_per_gpu.map_or("-".into(), |w| format!("{w:.0}")),
                p.joules_per_token.map_or("-".into(), |j| format!("{j:.3}")),
                p.usd_per_million_output_tokens
                    .map_or("-".into(), |u| format!("{u:.2}")),
                top.join(", "),
            ]);
            row
        })
        .collect();
    let mut head = vec!["C", "running", "TPOT ms"];
    if intervals {
        head.push("95 % ms");
    }
    head.extend([
        "SOL ms",
        "TTFT ms",
        "tok/s",
        "W/GPU",
        "J/tok",
        "$/Mtok",
        "largest terms",
    ]);
    o.push_str(&table(&head, &rows));
    let _ = writeln!(o);
    let mut m: Vec<(&&str, &f64)> = r
        .marginal_ms_per_token
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .collect();
    m.sort_by(|a, b| b.1.total_cmp(a.1));
    // Summed from zero, not from the empty sum's −0.0.
    let total: f64 = m.iter().fold(0.0, |s, (_, v)| s + **v);
    // Without a positive marginal cost (one sequence at a time fits the KV cache) there is
    // no asymptote to state: 1 / 0 is no throughput.
    let asymptote = if total > 0.0 {
        format!("{:.0} tok/s", r.asymptote_tok_s)
    } else {
        "none (no sequence can be added)".to_string()
    };
    if r.plateau_reached {
        let _ = writeln!(
            o,
            "plateau: {:.0} tok/s, reached by C = {} (gain per doubling below {:.0} %); asymptote without KV limit {asymptote}",
            r.plateau_tok_s,
            r.plateau_concurrency,
            r.plateau_threshold * 100.0,
        );
    } else if r.points.len() < 2 {
        // One concurrency shows no gain or its absence: say what the point is, not a trend.
        let _ = writeln!(
            o,
            "one concurrency swept ({:.0} tok/s at C = {}): a plateau needs at least two (e.g. --concurrency 1,2,4,...); asymptote {asymptote}",
            r.plateau_tok_s,
            r.plateau_concurrency,
        );
    } else {
        let _ = writeln!(
            o,
            "no plateau up to C = {}: throughput still gains {:.0} % or more per doubling ({:.0} tok/s at the last point); asymptote {asymptote}",
            r.plateau_concurrency,
            r.plateau_threshold * 100.0,
            r.plateau_tok_s,
        );
    }
    let _ = writeln!(
        o,
        "KV cache holds {} sequences of {:.0} tokens (what a request holds on average: {})",
        r.kv_max_concurrency,
        r.kv_held_tokens,
        if r.kv_held_tokens < (r.input_len + r.output_len) as f64 {
            "its prompt and half its output, the engine allocating as tokens arrive"
        } else {
            "its prompt and its whole output, reserved at admission"
        }
    );
    if total > 0.0 {
        let _ = writeln!(
            o,
            "marginal decode cost per added sequence at the plateau: {:.3} ms ({})",
            total,
            m.iter()
                .map(|(k, v)| format!("{k} {:.3}", v))
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        let _ = writeln!(
            o,
            "marginal decode cost per added sequence: none (the KV cache does not hold a second sequence)"
        );
    }
    let _ = writeln!(o, "limited by:");
    for l in &r.limits {
        let _ = writeln!(
            o,
            "  {} = {} {}: {}",
            l.term,
            crate::export::num(l.value, 4),
            l.unit,
            l.detail
        );
    }
    o
}
