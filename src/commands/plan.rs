//! `rooftop plan`: the deployments of a GPU budget that meet a TTFT and TPOT target, and the
//! Pareto front of tokens/s per GPU against tokens/s per user over aggregated and
//! disaggregated layouts ([`crate::plan`]).

use crate::cli::PlanArgs;
use crate::error::{Error, Result};
use crate::export::{self, round, table, Table, Tabular};
use crate::plan::{plan, Plan, PlanRequest};
use crate::spec::System;
use serde::Serialize;
use std::fmt::Write as _;

/// `--format csv`: one row per point of the front.
#[derive(Debug, Serialize)]
pub struct PlanRow<'a> {
    pub kind: &'a str,
    pub deployment: &'a str,
    pub gpus: u32,
    pub concurrency: u32,
    pub tpot_ms: f64,
    pub ttft_ms: f64,
    pub tok_s_per_user: f64,
    pub tok_s_per_gpu: f64,
    pub throughput_tok_s: f64,
    pub limited_by: &'a str,
}

impl Tabular for Plan {
    type Row<'a> = PlanRow<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(
            self.front
                .iter()
                .map(|p| PlanRow {
                    kind: p.kind,
                    deployment: &p.deployment,
                    gpus: p.gpus,
                    concurrency: p.concurrency,
                    tpot_ms: round(p.tpot_ms, 4),
                    ttft_ms: round(p.ttft_ms, 3),
                    tok_s_per_user: round(p.tok_s_per_user, 3),
                    tok_s_per_gpu: round(p.tok_s_per_gpu, 3),
                    throughput_tok_s: round(p.throughput_tok_s, 2),
                    limited_by: &p.limited_by,
                })
                .collect(),
        )
    }
}

pub fn run(a: &PlanArgs) -> Result<Vec<u8>> {
    let args = &a.scenario;
    if let Some(flag) = crate::commands::chosen_layout_flag(args) {
        return Err(Error::Usage(format!(
            "{flag} does not apply to plan: it tries every layout of the budget itself"
        )));
    }
    let mut model = crate::commands::load_model(args)?;
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let mut system = System::load_with_engine(&args.system, args.engine.as_deref(), &sets)?;
    let mut w = crate::commands::sweep::request_shape(
        a.request.input_len,
        a.request.output_len,
        crate::serve::TpotDef::Itl,
        false,
    )?;
    // The client as it ran against this server: its launch scripts' settings included, as
    // `sweep --client` takes them.
    w.client =
        crate::commands::sweep::client_launching(a.client.as_deref(), &mut system, &mut model)?;
    let r = PlanRequest {
        gpus: a.gpus.unwrap_or(system.spec.gpu_count),
        workload: w,
        tpot_target: a.tpot_target.map(|d| d.0 .0),
        ttft_target: a.ttft_target.map(|d| d.0 .0),
        disaggregated: !a.aggregated_only,
    };
    let counter =
        crate::progress::Counter::new("plan {bar:40} {pos}/{len} deployments priced, ETA {eta}");
    let progress = |done: u64, total: u64| counter.tell(done, total);
    let p = plan(&model, &system, &r, &progress)?;
    // An empty front is an answer no format can carry as rows: refused with why (exit 1),
    // as explore and compare refuse a grid where nothing runs.
    if p.front.is_empty() {
        return Err(Error::Scenario(format!(
            "no deployment of up to {} GPUs of {} meets the targets (TPOT {}, TTFT {}): \
             {} points of {} deployments priced, none within them; relax them, or give more \
             GPUs (--gpus)",
            p.gpus,
            p.system,
            ms_target(p.tpot_target_ms),
            ms_target(p.ttft_target_ms),
            p.points_evaluated,
            p.aggregated_evaluated + p.disaggregated_evaluated
        )));
    }
    export::export(&p, a.format, text)
}

fn ms_target(t: Option<f64>) -> String {
    t.map_or_else(|| "none".to_string(), |v| format!("{v} ms"))
}

/// The plan as text; `run` has refused an empty front before it gets here.
pub fn text(p: &Plan) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on up to {} GPUs of {}: {} in / {} out; targets TPOT {}, TTFT {}",
        p.model,
        p.gpus,
        p.system,
        p.input_len,
        p.output_len,
        ms_target(p.tpot_target_ms),
        ms_target(p.ttft_target_ms)
    );
    let _ = writeln!(
        o,
        "{} aggregated and {} disaggregated deployments priced ({} refused), {} points, {} within the targets\n",
        p.aggregated_evaluated,
        p.disaggregated_evaluated,
        p.refused,
        p.points_evaluated,
        p.points_meeting_targets
    );
    let rows: Vec<Vec<String>> = p
        .front
        .iter()
        .map(|f| {
            vec![
                f.deployment.clone(),
                f.gpus.to_string(),
                f.concurrency.to_string(),
                format!("{:.2}", f.tpot_ms),
                format!("{:.0}", f.ttft_ms),
                format!("{:.1}", f.tok_s_per_user),
                format!("{:.1}", f.tok_s_per_gpu),
                f.limited_by.clone(),
            ]
        })
        .collect();
    let _ = writeln!(
        o,
        "Pareto front (tokens/s per GPU against tokens/s per user), fastest per user first:"
    );
    o.push_str(&table(
        &[
            "deployment",
            "GPUs",
            "C",
            "TPOT ms",
            "TTFT ms",
            "tok/s/user",
            "tok/s/GPU",
            "limited by",
        ],
        &rows,
    ));
    o
}
