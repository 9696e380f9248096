//! `rooftop explain --measured NAME`: why a measured throughput curve stops growing. Every
//! mechanism that could hold the plateau, the parameter value it would need to hold it at the
//! measured rate, that value against its prior and sources, ranked, and the one measurement
//! that tells the top two apart.

use crate::calibrate::{calibrate, ParamKind};
use crate::cli::ExplainArgs;
use crate::commands::calibrate::{assumptions, load_measured};
use crate::commands::load;
use crate::cost::CostParams;
use crate::error::{Error, Result};
use crate::export::table;
use crate::serve::{sweep, ClientModel, TpotDef, Workload};
use std::fmt::Write as _;

struct Mechanism {
    name: &'static str,
    needed: String,
    prior: String,
    /// |log10(needed / prior)|: how far the data pushes the prior (0 = the prior itself).
    distance: f64,
    source: &'static str,
}

pub fn run(a: &ExplainArgs) -> Result<Vec<u8>> {
    let (args, m) = (&a.scenario, &a.measured);
    let l = load(args)?;
    let s0 = l.scenario()?;
    let (set, sources) = load_measured(m)?;
    // The GPU side as the whole measurement calibrates it (single-stream TPOT, shares and
    // the curve), without the serving mechanism calibration chose: what each mechanism
    // needs is then read against the GPU loop the data supports, not the datasheet priors.
    let cal = calibrate(&s0, &set, assumptions(m)?, sources.clone())?;
    let mut gpu = cal.params(&CostParams::default_for(s0.system));
    gpu.inflight_cap = None;
    gpu.api_per_token = None;
    let s = s0.with_params(gpu);
    let tputs = set.throughputs();
    let Some(&(c0, plateau)) = tputs.iter().min_by_key(|t| t.0) else {
        return Err(Error::Scenario(
            "no throughput point in the measurement: nothing to explain".into(),
        ));
    };
    let (i, o) = (m.assume_input_len.max(1), m.assume_output_len.max(1));
    let w = Workload {
        input_len: i,
        output_len: o,
        tpot_def: TpotDef::Itl,
        client: ClientModel::IDEAL,
    };
    let conc: Vec<u32> = (1..=1024).collect();
    let r = sweep(&s, &conc, w)?;
    let at = |c: u32| r.points[(c as usize).clamp(1, r.points.len()) - 1].clone();
    let gpu_c0 = at(c0).throughput_tok_s;
    let gpu_2c = at(2 * c0).throughput_tok_s;
    // Requests in flight at which the GPU loop alone delivers the plateau.
    let n_needed = r
        .points
        .iter()
        .find(|p| p.throughput_tok_s >= plateau)
        .map(|p| p.running);
    let mut mech = Vec::new();
    let eng = &l.system.engine;
    let ratio = |a: f64, b: f64| (a / b).log10().abs();
    if let Some(n) = n_needed {
        mech.push(Mechanism {
            name: "client connection cap",
            needed: format!("~{n} connections"),
            prior: "100 (aiohttp default connector)".into(),
            distance: ratio(n as f64, 100.0),
            source: "aiohttp TCPConnector(limit=100), httpx max_connections=100; vLLM issue #14513 (engines.md) [V]",
        });
        mech.push(Mechanism {
            name: "max_num_seqs",
            needed: format!("{}", n.max(c0).min(n)),
            prior: format!("{} (the engine's default)", eng.max_num_seqs),
            distance: ratio(n as f64, eng.max_num_seqs as f64),
            source: "vLLM get_batch_defaults (hardware.md) [V]; a deployment may set it lower",
        });
    }
    let api = 1.0 / plateau;
    mech.push(Mechanism {
        name: "API-server time per streamed token",
        needed: format!("{:.0} us per token", api * 1e6),
        prior: format!("{:.0} us", eng.cpu.api_per_token.0 * 1e6),
        distance: ratio(api, eng.cpu.api_per_token.0.max(1e-9)),
        source: "vLLM blog 2024-09-05: API server 33 % of execution time in v0.5.3 [V]; per-token figure a prior [U]",
    });
    mech.push(Mechanism {
        name: "client CPU per received chunk",
        needed: format!("{:.0} us per chunk", api * 1e6),
        prior: "10 us (one Python process per SSE event)".into(),
        distance: ratio(api, 10e-6),
        source: "engines.md: a single-process streaming client spends CPU per chunk [V]; the figure a prior [U]",
    });
    // Engine CPU per sequence in series: r / (g(r) + r x) = plateau at 2 c0.
    let p2 = at(2 * c0);
    let g = p2.tpot_itl_ms * 1e-3 - p2.running as f64 * eng.cpu.per_seq.0;
    let x = ((p2.running as f64 / plateau) - g) / p2.running as f64;
    if x > 0.0 {
        mech.push(Mechanism {
            name: "engine CPU per running sequence (in series)",
            needed: format!("{:.0} us per sequence per step", x * 1e6),
            prior: format!("{:.0} us", eng.cpu.per_seq.0 * 1e6),
            distance: ratio(x, eng.cpu.per_seq.0.max(1e-9)),
            source:
                "vLLM v0.5.3 profile: scheduling 29 % of time [V]; per-sequence figure a prior [U]",
        });
    }
    let mem = s.memory(1.0, (i + o) as f64);
    let len = mem.max_kv_tokens / c0 as f64;
    mech.push(Mechanism {
        name: "requests long enough to fill the KV cache",
        needed: format!("~{:.0} tokens per request", len),
        prior: format!("{} tokens assumed (prompt {i} + output {o})", i + o),
        distance: ratio(len, (i + o) as f64),
        source: "the record gives no request lengths [V]; the macro-benchmark's single-stream runs use 32 output tokens",
    });
    mech.sort_by(|a, b| a.distance.total_cmp(&b.distance));
    let mut out = String::new();
    let _ =
        writeln!(
        out,
        "{} on {} ({}), engine {}: measured {:.0} tok/s from C = {c0}, not improving beyond ({})",
        l.model.name, l.system.spec.name, l.parallel, eng.name, plateau, sources.join(", ")
    );
    let _ = writeln!(
        out,
        "the calibrated GPU loop alone (prompt {i}, output {o}, no client cap): {:.0} tok/s at C = {c0}, {:.0} at C = {}",
        gpu_c0, gpu_2c, 2 * c0
    );
    if let Some(limit) = &cal.serving_limit {
        let chosen = cal
            .parameters
            .iter()
            .find(|f| matches!(f.kind, ParamKind::InflightCap | ParamKind::ApiPerToken));
        let _ = writeln!(
            out,
            "calibration chose: {}{}",
            limit.chosen,
            chosen
                .map(|f| format!(
                    " = {:.0} [{:.0}, {:.0}] ({}; `rooftop calibrate` shows every candidate's score)",
                    f.value, f.ci95_low, f.ci95_high, f.name
                ))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(out);
    let rows: Vec<Vec<String>> = mech
        .iter()
        .enumerate()
        .map(|(k, m)| {
            vec![
                (k + 1).to_string(),
                m.name.into(),
                m.needed.clone(),
                m.prior.clone(),
                if m.distance < 0.3 {
                    "plausible".into()
                } else if m.distance < 1.0 {
                    "possible".into()
                } else {
                    format!("implausible ({:.0}x the prior)", 10f64.powf(m.distance))
                },
                m.source.into(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["rank", "mechanism", "needed", "prior", "verdict", "source"],
        &rows,
    ));
    if mech.len() >= 2 {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "to tell {} from {}: {}",
            mech[0].name,
            mech[1].name,
            crate::calibrate::separating_test(mech[0].name, mech[1].name)
        );
    }
    Ok(out.into_bytes())
}
