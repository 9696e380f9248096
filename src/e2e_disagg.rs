//! Disaggregated serving runs against the model: each run of an `e2e_disagg.csv`-style file
//! (its engine, model, system, the prefill and decode pools' worker counts and layouts,
//! request lengths and concurrency) predicted with [`crate::deploy`], and the TPOT and TTFT
//! errors summarised per group as the aggregated validation does ([`crate::e2e`]: the same
//! model, system and engine mapping of `configs/e2e/models.toml`, the same record).
//!
//! Runs rooftop cannot predict are skipped and counted with the reason, never given a
//! number: a worker that needs more GPUs than one box of its system (multi-node workers are
//! not modelled), a pool whose worker count the file does not record (the source left it out
//! on many runs; the file's other copies of the same runs show one to six workers per pool,
//! so no count can be read into an empty one), and what the aggregated mapping skips (no
//! description of the model, a layout rooftop cannot express, a configuration that does not
//! fit).
//!
//! The engine runs unversioned: the disaggregated file's `backend_version` of TensorRT-LLM
//! runs is the Dynamo release that packaged it (0.8.1), not TensorRT-LLM's own.

use crate::deploy::{check_box, sweep, Deployment, KvLink, Pool};
use crate::e2e::{layout, E2eMap, E2eValidation, GroupField, HarnessUse, Loaded, RunRow, Tally};
use crate::error::Result;
use crate::measured::e2e_csv::{repeated_lines, REPEAT_REASON};
use crate::measured::e2e_disagg_csv::{DisaggRun, RoleLayout};
use crate::predict::Scenario;
use crate::serve::{ClientModel, TpotDef, Workload};
use crate::spec::overrides::Override;
use crate::spec::registry;

/// The pool of one role, or why the run does not give one.
///
/// The prefill pool's `batch_size` is not read as prompts per pass: it is 1 on every run of
/// the dev file, whatever the engine, layout or load, so it records no setting the runs
/// varied, and a prefill engine fills its pass by its token budget. The decode pool's is the
/// sequences each attention-DP replica runs (the concurrency over its workers and replicas,
/// where both are recorded).
fn pool(
    role: &str,
    r: &RoleLayout,
    parallel: crate::cost::Parallel,
) -> std::result::Result<Pool, String> {
    let workers = r.num_workers.ok_or_else(|| {
        format!(
            "{role} num_workers not recorded (the source left it out; the file's other copies of these runs show 1 to 6 workers per pool): no count is guessed"
        )
    })?;
    Ok(Pool {
        workers,
        parallel,
        batch: if role == "decode" { r.batch_size } else { None },
    })
}

/// Evaluate every run with the user's `--set` overrides, `client` in place of the mapping's
/// (`--client`), grouped by `group_by`; `source` labels the record.
pub fn evaluate(
    runs: &[DisaggRun],
    source: &str,
    sets: &[Override],
    client: Option<&str>,
    group_by: &[GroupField],
) -> Result<E2eValidation> {
    let map = E2eMap::builtin()?;
    let link = KvLink::builtin()?;
    let (name, how) = match client {
        Some(c) => (c.to_string(), "--client"),
        None => match &map.disagg_client {
            Some(c) => (c.clone(), "mapped"),
            None => (map.client.clone(), "default"),
        },
    };
    let client_spec = registry::load_client(&name)?;
    let mut loaded = Loaded::default();
    let mut tally = Tally::default();
    let repeats = repeated_lines(runs, |r| r.request.line, DisaggRun::fields_without_line);
    for (run, repeat) in runs.iter().zip(repeats) {
        if repeat.is_some() {
            tally.add(run.request.line, Err(REPEAT_REASON.to_string()));
            continue;
        }
        let pre_run = run.as_e2e(&run.prefill);
        let dec_run = run.as_e2e(&run.decode);
        let model = loaded.model(&map, &dec_run, sets)?;
        // The smallest system that holds the larger worker (a worker of more GPUs than a
        // node takes a multi-node system, whose collectives cross the NICs).
        let worker = |r: &crate::measured::e2e_csv::E2eRun| r.tp * r.attention_dp * r.pp;
        let gpus = worker(&pre_run).max(worker(&dec_run));
        let launch = model.as_ref().ok().map(|m| (&client_spec, m));
        let system = loaded.system(&map, &dec_run, sets, gpus, launch, str::to_string)?;
        let attempt = (|| -> std::result::Result<RunRow, String> {
            let system = system?;
            let mut model = model?;
            client_spec.launch_model(system, &mut model);
            let run_client: ClientModel = client_spec.model_for(system, &model);
            let moe = model.moe().is_some();
            let pre_par = layout(&pre_run, moe)?;
            let dec_par = layout(&dec_run, moe)?;
            // A worker fits in one box before anything else is asked of it.
            let boxed = |role: &str, p| {
                check_box(
                    role,
                    &Pool {
                        workers: 1,
                        parallel: p,
                        batch: None,
                    },
                    system,
                )
                .map_err(|e| e.to_string())
            };
            boxed("prefill", pre_par)?;
            boxed("decode", dec_par)?;
            let d = Deployment {
                prefill: pool("prefill", &run.prefill, pre_par)?,
                decode: pool("decode", &run.decode, dec_par)?,
                link: link.clone(),
            };
            let pre_s = Scenario::new(&model, system, pre_par).map_err(|e| e.to_string())?;
            let dec_s = Scenario::new(&model, system, dec_par).map_err(|e| e.to_string())?;
            let w = Workload {
                input_len: dec_run.isl,
                output_len: dec_run.osl,
                tpot_def: TpotDef::Itl,
                client: run_client,
            };
            let r =
                sweep(&pre_s, &dec_s, &d, &[dec_run.concurrency], w).map_err(|e| e.to_string())?;
            let p = &r.points[0];
            let ctx = dec_run.isl as f64 + dec_run.osl as f64 / 2.0;
            let dec_sol = dec_s.sol_evaluator().map_err(|e| e.to_string())?;
            let sol = dec_sol.evaluate(&crate::cost::Pass::decode(1.0, ctx)).total;
            tally.check_floor(dec_run.line, dec_run.tpot, sol, &system.spec.name);
            // The decode pool's step at the batch one of its workers runs, as mapped.
            let sol_at_batch = dec_sol
                .evaluate(&crate::cost::Pass::decode(p.decode_batch.max(1.0), ctx))
                .total;
            if let Some(why) =
                crate::e2e::below_sol_at_batch(dec_run.tpot, sol_at_batch, p.decode_batch)
            {
                return Err(why);
            }
            // No first token comes sooner than the shortest prompt's prefill, alone on one
            // prefill worker, at the speed of light.
            let pre_sol = pre_s.sol_evaluator().map_err(|e| e.to_string())?;
            let first = crate::e2e::first_token_floor(&pre_sol, &dec_run, &run_client);
            if let Some(why) = crate::e2e::ttft_below_sol(dec_run.ttft, first) {
                return Err(why);
            }
            Ok(RunRow::new(
                &dec_run,
                &model.name,
                &system.spec.name,
                format!(
                    "prefill {} / decode {}",
                    d.prefill.label(),
                    d.decode.label()
                ),
                &name,
                p.tpot_ms * 1e-3,
                p.ttft_ms * 1e-3,
            ))
        })();
        tally.add(dec_run.line, attempt);
    }
    let harnesses = vec![HarnessUse {
        campaign: String::new(),
        client: name.clone(),
        how,
        runs: runs.len(),
    }];
    tally.finish(source, runs.len(), group_by, harnesses)
}
