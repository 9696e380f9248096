//! `rooftop sweep` and `rooftop compare` with a disaggregated deployment (`--prefill` and
//! `--decode`, or `--deployment FILE`): TTFT with its terms, TPOT, throughput and the
//! limiting pool at each concurrency ([`crate::deploy`]).

use crate::cli::{CompareArgs, DeploymentArgs, ScenarioArgs, SweepArgs};
use crate::deploy::{sweep, Deployment, DisaggPoint, DisaggSweep, KvLink, DEFAULT_KV_LINK};
use crate::error::{Error, Result};
use crate::export::{self, table, Table, Tabular};
use crate::predict::Scenario;
use crate::serve::Workload;
use crate::spec::{ModelSpec, System};
use serde::Serialize;
use std::fmt::Write as _;

/// The deployment the options describe.
pub fn deployment(a: &DeploymentArgs) -> Result<Deployment> {
    let link = a.kv_link.as_deref();
    if let Some(path) = &a.deployment {
        let text = crate::files::read_text(path)?;
        return Deployment::parse_at(&text, path, link);
    }
    match (a.prefill, a.decode) {
        (Some(prefill), Some(decode)) => Ok(Deployment {
            prefill,
            decode,
            link: KvLink::load(link.unwrap_or(DEFAULT_KV_LINK))?,
        }),
        _ => Err(Error::Scenario(
            "a disaggregated deployment needs both --prefill and --decode (or --deployment FILE)"
                .into(),
        )),
    }
}

/// The layout options describe one pool; with a deployment each pool has its own.
fn refuse_layout_flags(args: &ScenarioArgs) -> Result<()> {
    if let Some(flag) = crate::commands::chosen_layout_flag(args) {
        return Err(Error::Usage(format!(
            "{flag} does not apply to a disaggregated deployment: each pool gives its own layout in --prefill / --decode (calibrations describe one aggregated pool)"
        )));
    }
    Ok(())
}

/// The deployment on one system: both pools' scenarios, each refused with its pool named.
fn evaluate(
    model: &ModelSpec,
    system: &System,
    d: &Deployment,
    concurrency: &[u32],
    w: Workload,
) -> Result<DisaggSweep> {
    crate::deploy::check_box("prefill", &d.prefill, system)?;
    crate::deploy::check_box("decode", &d.decode, system)?;
    fn named(role: &'static str) -> impl Fn(Error) -> Error {
        move |e| Error::Scenario(format!("{role} pool: {e}"))
    }
    let pre = Scenario::new(model, system, d.prefill.parallel).map_err(named("prefill"))?;
    let dec = Scenario::new(model, system, d.decode.parallel).map_err(named("decode"))?;
    sweep(&pre, &dec, d, concurrency, w)
}

pub fn run_sweep(a: &SweepArgs) -> Result<Vec<u8>> {
    let args = &a.scenario;
    refuse_layout_flags(args)?;
    let d = deployment(&a.deployment)?;
    let mut model = crate::commands::load_model(args)?;
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let mut system = System::load_with_engine(&args.system, args.engine.as_deref(), &sets)?;
    // The client as it ran against this server, as `sweep --client` takes it.
    let w = crate::commands::sweep::workload(&a.serving, &mut system, &mut model)?;
    if w.tpot_def == crate::serve::TpotDef::E2e {
        return Err(Error::Usage(
            "TPOT as E2E / output (--tpot-def e2e, or a --client whose tpot is e2e) does \
             not apply to a disaggregated deployment: its TPOT is the decode pool's \
             inter-token time (pass --tpot-def itl), and its TTFT is reported beside it"
                .into(),
        ));
    }
    let mut conc = a.serving.concurrency.clone();
    conc.sort_unstable();
    conc.dedup();
    let r = evaluate(&model, &system, &d, &conc, w)?;
    export::export(&r, a.format, sweep_text)
}

impl Tabular for DisaggSweep {
    type Row<'a> = &'a DisaggPoint;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(self.points.iter().collect())
    }
}

pub fn sweep_text(r: &DisaggSweep) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on {}: prefill {} / decode {} ({} GPUs), KV over {}; input {} / output {} tokens",
        r.model, r.system, r.prefill, r.decode, r.gpus, r.kv_link, r.input_len, r.output_len
    );
    let _ = writeln!(
        o,
        "KV cache {:.0} bytes per token per decode replica; one request's transfer alone {:.2} ms",
        r.kv_bytes_per_token, r.kv_transfer_alone_ms
    );
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            vec![
                p.concurrency.to_string(),
                format!("{:.0}", p.ttft_ms),
                format!(
                    "{:.0} + {:.0} + {:.1} + {:.1}",
                    p.prefill_ms, p.queue_ms, p.kv_transfer_ms, p.first_step_ms
                ),
                format!("{:.2}", p.tpot_ms),
                format!("{:.1} / {}", p.decode_batch, p.decode_slots),
                format!("{:.0}", p.throughput_tok_s),
                format!("{:.0}", p.throughput_per_gpu_tok_s),
                format!(
                    "{}{}",
                    p.limiting_pool,
                    if p.saturated { " (saturated)" } else { "" }
                ),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "C",
            "TTFT ms",
            "prefill + queue + KV + first step",
            "TPOT ms",
            "decode batch / slots",
            "tok/s",
            "tok/s/GPU",
            "limiting pool",
        ],
        &rows,
    ));
    if let Some(p) = r.points.last() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "capacity, requests/s: prefill {:.2}, decode {:.2}, KV link {:.2}",
            p.prefill_capacity_req_s, p.decode_capacity_req_s, p.kv_link_capacity_req_s
        );
    }
    if let Some(p) = r.points.iter().find(|p| p.in_flight < p.concurrency) {
        let _ = writeln!(
            o,
            "the client holds at most {} requests in flight from C = {}: the rest wait for a \
             connection (in the queue term) or are never sent",
            p.in_flight, p.concurrency
        );
    }
    o
}

/// A deployment on each system.
#[derive(Debug, Clone, Serialize)]
pub struct DisaggComparison {
    pub concurrency: Vec<u32>,
    pub rows: Vec<DisaggCompareRow>,
}

/// One system's row: its sweep, or why it cannot run.
#[derive(Debug, Clone, Serialize)]
pub struct DisaggCompareRow {
    pub system: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<DisaggSweep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One CSV row of a disaggregated comparison: a system at one concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct DisaggCompareCsv<'a> {
    pub system: &'a str,
    pub error: &'a str,
    pub concurrency: Option<u32>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub throughput_tok_s: Option<f64>,
    pub throughput_per_gpu_tok_s: Option<f64>,
    pub limiting_pool: &'a str,
}

impl Tabular for DisaggComparison {
    type Row<'a> = DisaggCompareCsv<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        let mut rows = Vec::new();
        for r in &self.rows {
            match &r.sweep {
                Some(s) => rows.extend(s.points.iter().map(|p| DisaggCompareCsv {
                    system: &r.system,
                    error: "",
                    concurrency: Some(p.concurrency),
                    ttft_ms: Some(p.ttft_ms),
                    tpot_ms: Some(p.tpot_ms),
                    throughput_tok_s: Some(p.throughput_tok_s),
                    throughput_per_gpu_tok_s: Some(p.throughput_per_gpu_tok_s),
                    limiting_pool: p.limiting_pool,
                })),
                None => rows.push(DisaggCompareCsv {
                    system: &r.system,
                    error: r.error.as_deref().unwrap_or(""),
                    concurrency: None,
                    ttft_ms: None,
                    tpot_ms: None,
                    throughput_tok_s: None,
                    throughput_per_gpu_tok_s: None,
                    limiting_pool: "",
                }),
            }
        }
        Table::flat(rows)
    }
}

pub fn run_compare(a: &CompareArgs) -> Result<Vec<u8>> {
    let (args, c) = (&a.scenario, &a.comparison);
    refuse_layout_flags(args)?;
    if !c.parallel.is_empty() {
        return Err(Error::Usage(
            "--parallel does not apply to a disaggregated deployment: each pool gives its own layout in --prefill / --decode".into(),
        ));
    }
    // What the aggregated comparison reads and this one does not: refused, never dropped.
    for (given, flag) in [
        (c.tpot_target.is_some(), "--tpot-target"),
        (c.ttft_target.is_some(), "--ttft-target"),
        (a.objective.is_some(), "--objective"),
        (a.plot.is_some(), "--plot"),
        (c.context != crate::cli::DEFAULT_CONTEXT, "--context"),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "{flag} does not apply to a comparison of disaggregated deployments (its rows are \
                 each system's sweep of the pools; targets and the buyer's table are for \
                 aggregated layouts): use `rooftop plan` to size a deployment to TTFT and TPOT \
                 targets, or compare without --prefill/--decode"
            )));
        }
    }
    let d = deployment(&a.deployment)?;
    let model = crate::commands::load_model(args)?;
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let w = crate::commands::sweep::request_shape(
        c.request.input_len,
        c.request.output_len,
        crate::serve::TpotDef::Itl,
        false,
    )?;
    let mut conc = c.concurrency.clone();
    conc.sort_unstable();
    conc.dedup();
    let mut rows = Vec::new();
    for (label, sys) in crate::whatif::load_variants(&c.systems.0, args.engine.as_deref(), &sets)? {
        let r = evaluate(&model, &sys, &d, &conc, w);
        rows.push(DisaggCompareRow {
            system: label,
            error: r.as_ref().err().map(|e| e.to_string()),
            sweep: r.ok(),
        });
    }
    if rows.iter().all(|r| r.sweep.is_none()) {
        let why: Vec<String> = rows
            .iter()
            .map(|r| format!("{}: {}", r.system, r.error.as_deref().unwrap_or("")))
            .collect();
        return Err(Error::Scenario(format!(
            "the deployment runs on no system:\n  {}",
            why.join("\n  ")
        )));
    }
    let cmp = DisaggComparison {
        concurrency: conc,
        rows,
    };
    export::export(&cmp, a.format, compare_text)
}

fn compare_text(r: &DisaggComparison) -> String {
    let mut o = String::new();
    for row in &r.rows {
        match &row.sweep {
            Some(s) => o.push_str(&sweep_text(s)),
            None => {
                let _ = writeln!(
                    o,
                    "{}: cannot run: {}",
                    row.system,
                    row.error.as_deref().unwrap_or("")
                );
            }
        }
        let _ = writeln!(o);
    }
    o
}
