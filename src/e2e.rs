//! End-to-end serving runs against the model: each run of an e2e serving CSV (its own engine,
//! model, system, layout, request lengths and concurrency) predicted with rooftop's serving
//! loop, and the errors of TPOT and TTFT summarised per group of runs (backend × system ×
//! model unless `--group-by` names other fields: a version or precision apart from another
//! is how a campaign's own behaviour shows).
//!
//! The mapping from the file's names to rooftop's descriptions is data
//! (`configs/e2e/models.toml`): HF id → built-in model with the row's quant modes applied, the
//! file's system name → a built-in system. A run that cannot be mapped (no description of its
//! model, a quant mode or layout rooftop cannot express, a configuration that does not fit) is
//! counted as skipped with its reason; nothing is guessed.

use crate::cost::Parallel;
use crate::error::{Error, Result};
use crate::measured::e2e_csv::{
    relabelled_lines, repeated_lines, E2eRun, RELABEL_REASON, REPEAT_REASON,
};
use crate::predict::Scenario;
use crate::serve::{sweep, TpotDef, Workload};
use crate::spec::overrides::{apply, Override, Target};
use crate::spec::{registry, ModelSpec, System};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The mapping file embedded in the binary.
pub const MODELS_TOML: &str = include_str!("../configs/e2e/models.toml");
const MODELS_LABEL: &str = "configs/e2e/models.toml";

/// `configs/e2e/models.toml`, read 1:1.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct E2eMap {
    /// The client of a run whose campaign `clients` does not name (`configs/clients/`).
    pub client: String,
    /// The client of a disaggregated run (those files record no campaign); absent: `client`.
    #[serde(default)]
    pub disagg_client: Option<String>,
    /// A run's recorded campaign -> the client that measured it. A key ending in `*`
    /// matches every campaign that begins with what precedes it.
    #[serde(default)]
    pub clients: BTreeMap<String, String>,
    /// Backend -> engine description.
    pub engines: BTreeMap<String, String>,
    /// The run's system column -> a built-in system, or a list of them from the smallest: the
    /// run takes the first with GPUs enough for its layout (one box, then the multi-node
    /// systems of that GPU).
    pub systems: BTreeMap<String, SystemChoice>,
    pub quant_modes: BTreeMap<String, String>,
    /// Engine images that ran only configs that speculate: runs on them are set aside.
    #[serde(default)]
    pub speculative: Vec<SpeculativeImage>,
    pub models: Vec<ModelEntry>,
}

/// An engine image that a benchmark's launch configs use only with speculative decoding: a
/// run of one of `hf_ids` on `backend` whose recorded image ends with `image_suffix`
/// speculated, and its TPOT depends on an acceptance the run does not record.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeImage {
    pub backend: String,
    pub image_suffix: String,
    pub hf_ids: Vec<String>,
    /// What the launch scripts run (for the reason shown).
    pub method: String,
    /// Tokens drafted per step, as the launch scripts set them.
    pub draft_tokens: String,
    /// Where the image-to-config facts were read.
    pub source: String,
}

/// A system column's built-in system, or its systems by size.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SystemChoice {
    One(String),
    BySize(Vec<String>),
}

impl SystemChoice {
    /// The candidates, smallest first.
    pub fn names(&self) -> &[String] {
        match self {
            SystemChoice::One(n) => std::slice::from_ref(n),
            SystemChoice::BySize(v) => v,
        }
    }
}

/// One HF id and the built-in that describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub hf_id: String,
    pub builtin: String,
    /// Precisions at which the row ran the published checkpoint (built-in unchanged).
    #[serde(default)]
    pub native_precision: Vec<String>,
    /// Quantization fields `gemm_quant_mode` sets.
    #[serde(default = "default_gemm_fields")]
    pub gemm_fields: Vec<String>,
    /// KV-cache format a run at this `precision` stores (a `kv_cache` value), where the file
    /// does not record it but the checkpoint that precision implies sets it; other precisions
    /// keep the built-in's.
    #[serde(default)]
    pub kv_cache: BTreeMap<String, String>,
}

fn default_gemm_fields() -> Vec<String> {
    ["default", "attention", "dense_mlp", "shared_experts"]
        .map(String::from)
        .to_vec()
}

impl E2eMap {
    pub fn builtin() -> Result<E2eMap> {
        registry::parse_toml(MODELS_TOML, MODELS_LABEL)
    }

    /// The model description for a run, or why there is none.
    pub fn model(&self, run: &E2eRun) -> std::result::Result<ModelSpec, String> {
        let entry = self
            .models
            .iter()
            .find(|m| m.hf_id == run.model_path)
            .ok_or_else(|| {
                format!(
                    "no description of {} (add one to {MODELS_LABEL})",
                    run.model_path
                )
            })?;
        let model = registry::load_model(&entry.builtin).map_err(|e| e.to_string())?;
        let kv = entry.kv_cache.get(&run.precision);
        let native = entry.native_precision.contains(&run.precision);
        if native && kv.is_none() {
            return Ok(model);
        }
        let fmt = |mode: &str| -> std::result::Result<Option<&String>, String> {
            if mode.is_empty() {
                return Ok(None);
            }
            self.quant_modes
                .get(mode)
                .map(Some)
                .ok_or_else(|| format!("quant mode \"{mode}\" not in {MODELS_LABEL}"))
        };
        let mut sets = Vec::new();
        if !native {
            if let Some(f) = fmt(&run.gemm_quant_mode)? {
                for field in &entry.gemm_fields {
                    sets.push(format!("model.quantization.{field}={f}"));
                }
            }
            if model.moe().is_some() {
                if let Some(f) = fmt(&run.moe_quant_mode)? {
                    sets.push(format!("model.quantization.routed_experts={f}"));
                }
            }
        }
        if let Some(kv) = kv {
            sets.push(format!("model.quantization.kv_cache={kv}"));
        }
        let sets: Vec<Override> = sets
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_>>()
            .map_err(|e| e.to_string())?;
        let m: ModelSpec =
            apply(&model, Target::Model, &sets, &entry.builtin).map_err(|e| e.to_string())?;
        m.validate().map_err(|(f, e)| format!("{f}: {e}"))?;
        Ok(m)
    }

    /// The client that measured `run`, from what the run records of how it was made (its
    /// campaign; never its measurements), and whether the mapping knows that campaign (when
    /// not, the default `client`).
    pub fn client_of(&self, run: &E2eRun) -> (&str, bool) {
        let exact = self.clients.get(&run.campaign);
        let prefixed = || {
            self.clients
                .iter()
                .filter_map(|(k, v)| Some((k.strip_suffix('*')?, v)))
                .filter(|(k, _)| run.campaign.starts_with(k))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, v)| v)
        };
        match exact.or_else(prefixed) {
            Some(c) if !run.campaign.is_empty() => (c.as_str(), true),
            _ => (self.client.as_str(), false),
        }
    }

    /// Why `run` is set aside as a speculative run (its image serves only configs that
    /// speculate), or `None`. Read from how the run was made (its backend, image and model),
    /// never from what it measured.
    pub fn speculation(&self, run: &E2eRun) -> Option<String> {
        let image = run.image.trim();
        let s = self.speculative.iter().find(|s| {
            s.backend == run.backend
                && !image.is_empty()
                && image.ends_with(s.image_suffix.as_str())
                && s.hf_ids.contains(&run.model_path)
        })?;
        Some(format!(
            "speculative decoding on ({}, drafting {}), as its image ...{} says \
             ({MODELS_LABEL} [[speculative]]): its TPOT depends on an acceptance the run does \
             not record",
            s.method, s.draft_tokens, s.image_suffix
        ))
    }

    /// The built-in systems the run's system column maps to, smallest first.
    pub fn system(&self, run: &E2eRun) -> std::result::Result<&[String], String> {
        match self.systems.get(&run.system).map(SystemChoice::names) {
            Some(names) if !names.is_empty() => Ok(names),
            _ => Err(format!("system \"{}\" not in {MODELS_LABEL}", run.system)),
        }
    }
}

/// `model` with the user's `--set model.*` overrides applied (after the run's quant modes,
/// so they win) and validated. A bad override is the user's error, not the run's: it fails
/// the whole validation.
pub(crate) fn with_user_sets(model: ModelSpec, user: &[Override]) -> Result<ModelSpec> {
    if !user.iter().any(|o| o.target == Target::Model) {
        return Ok(model);
    }
    let label = model.name.clone();
    let m: ModelSpec = apply(&model, Target::Model, user, &label)?;
    m.validate()
        .map_err(|fe| crate::spec::after_set(&label, Target::Model, user, fe))?;
    Ok(m)
}

/// The run's layout in rooftop's terms, or why rooftop cannot express it.
///
/// The file's degrees: `tp` (attention tensor parallel), `attention_dp`, `pp`, and the MoE
/// layer's `moe_tp × moe_ep`, which must cover the stage's `tp × attention_dp` GPUs. Rooftop's
/// layout is tp × dp × pp GPUs with `ep` expert groups each tensor-split over `tp × dp / ep`,
/// so `moe_tp` must equal `tp × dp / moe_ep`. Dense models ignore the MoE degrees.
pub fn layout(run: &E2eRun, moe: bool) -> std::result::Result<Parallel, String> {
    let stage = run.tp * run.attention_dp;
    let ep = if moe {
        if run.moe_tp == 0 || run.moe_ep == 0 {
            return Err(format!(
                "MoE degrees moe_tp {} × moe_ep {}: 0 is not a degree",
                run.moe_tp, run.moe_ep
            ));
        }
        if run.moe_tp * run.moe_ep != stage {
            return Err(format!(
                "moe_tp {} × moe_ep {} does not cover tp {} × attention_dp {}: rooftop's expert layout spans the attention GPUs",
                run.moe_tp, run.moe_ep, run.tp, run.attention_dp
            ));
        }
        run.moe_ep
    } else {
        1
    };
    Ok(Parallel {
        tp: run.tp,
        ep,
        pp: run.pp,
        dp: run.attention_dp,
        redundant_experts: 0,
    })
}

/// One run: measured and predicted.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub line: usize,
    pub backend: String,
    pub backend_version: String,
    pub model_path: String,
    pub model: String,
    /// The file's precision column.
    pub precision: String,
    pub system: String,
    pub parallel: String,
    pub isl: u32,
    pub osl: u32,
    /// The client's concurrency (all attention-DP replicas together).
    pub concurrency: u32,
    /// The run's recorded campaign, its engine image (empty where the file records none),
    /// and the client it was predicted with.
    pub campaign: String,
    pub image: String,
    pub client: String,
    pub measured_tpot_ms: f64,
    pub predicted_tpot_ms: f64,
    pub tpot_error: f64,
    pub measured_ttft_ms: f64,
    pub predicted_ttft_ms: f64,
    pub ttft_error: f64,
}

/// Errors of one group of runs: relative, (predicted − measured) / measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorSummary {
    pub n: usize,
    pub median_abs: f64,
    pub p90_abs: f64,
    /// Median signed error (positive: the model predicts slower).
    pub bias: f64,
}

impl ErrorSummary {
    pub fn of(errors: &[f64]) -> ErrorSummary {
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        let mut signed = errors.to_vec();
        abs.sort_by(f64::total_cmp);
        signed.sort_by(f64::total_cmp);
        ErrorSummary {
            n: errors.len(),
            median_abs: quantile(&abs, 0.5),
            p90_abs: quantile(&abs, 0.9),
            bias: quantile(&signed, 0.5),
        }
    }
}

/// Linear-interpolated quantile of sorted values (NaN when empty).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A field of a run that the error summary can be grouped by (`validate --group-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GroupField {
    Backend,
    /// The backend's version.
    Version,
    System,
    /// The file's model id.
    Model,
    /// The file's precision column.
    Precision,
    /// The layout, as rooftop writes it (tp8ep8, ...).
    Parallel,
    Isl,
    Osl,
    Concurrency,
    /// The run's recorded campaign.
    Campaign,
    /// The engine image the run records.
    Image,
    /// The client the run was predicted with.
    Client,
}

impl GroupField {
    /// The grouping `validate` prints unless asked for another.
    pub const DEFAULT: [GroupField; 3] =
        [GroupField::Backend, GroupField::System, GroupField::Model];

    pub fn name(self) -> &'static str {
        match self {
            GroupField::Backend => "backend",
            GroupField::Version => "version",
            GroupField::System => "system",
            GroupField::Model => "model",
            GroupField::Precision => "precision",
            GroupField::Parallel => "parallel",
            GroupField::Isl => "isl",
            GroupField::Osl => "osl",
            GroupField::Concurrency => "concurrency",
            GroupField::Campaign => "campaign",
            GroupField::Image => "image",
            GroupField::Client => "client",
        }
    }

    /// The run's value of this field, as the group key shows it.
    fn of(self, r: &RunRow) -> String {
        match self {
            GroupField::Backend => r.backend.clone(),
            GroupField::Version => r.backend_version.clone(),
            GroupField::System => r.system.clone(),
            GroupField::Model => r.model_path.clone(),
            GroupField::Precision => r.precision.clone(),
            GroupField::Parallel => r.parallel.clone(),
            GroupField::Isl => r.isl.to_string(),
            GroupField::Osl => r.osl.to_string(),
            GroupField::Concurrency => r.concurrency.to_string(),
            GroupField::Campaign => r.campaign.clone(),
            GroupField::Image => r.image.clone(),
            GroupField::Client => r.client.clone(),
        }
    }
}

/// One group of runs (by default backend × system × model).
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    /// Backend, system and model of the group ("*" where the grouping does not split by it).
    pub backend: String,
    pub system: String,
    pub model: String,
    /// The group's value of every field it is grouped by, in order.
    pub key: Vec<(String, String)>,
    pub tpot: ErrorSummary,
    pub ttft: ErrorSummary,
}

/// Runs not evaluated, by reason.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub reason: String,
    pub runs: usize,
    /// First line with this reason.
    pub first_line: usize,
}

/// The client a campaign's runs were predicted with.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessUse {
    /// The recorded campaign (empty: the file does not say).
    pub campaign: String,
    pub client: String,
    /// `mapped` (configs/e2e/models.toml names the campaign's harness), `default` (it does
    /// not: the documented default client), or `--client` (the user's).
    pub how: &'static str,
    pub runs: usize,
}

/// The e2e validation record.
#[derive(Debug, Clone, Serialize)]
pub struct E2eValidation {
    pub source: String,
    pub total_runs: usize,
    pub overall_tpot: ErrorSummary,
    pub overall_ttft: ErrorSummary,
    /// The fields `groups` are keyed by.
    pub group_by: Vec<GroupField>,
    pub groups: Vec<GroupRow>,
    /// The client each campaign's runs were predicted with.
    pub harnesses: Vec<HarnessUse>,
    pub skipped: Vec<Skipped>,
    pub runs: Vec<RunRow>,
}

/// What `predict` gives for one run, seconds.
struct Predicted {
    tpot: f64,
    ttft: f64,
    /// The fastest decode step of the model on this system: one sequence.
    floor: f64,
    /// The speed-of-light decode step at the batch the run maps to (its decoding sequences
    /// at its mean context): no decode step of the run as mapped can be faster.
    sol_at_batch: f64,
    /// Sequences decoding in a step, mean, as mapped.
    decode_batch: f64,
    /// The least time any first token of the run takes, and the prompt it is of
    /// ([`first_token_floor`]).
    first_token_floor: (f64, f64),
}

/// Predicted TPOT and TTFT of one run, with its speed-of-light bounds, on a loaded scenario.
fn predict(s: &Scenario, run: &E2eRun, client: crate::serve::ClientModel) -> Result<Predicted> {
    let w = Workload {
        input_len: run.isl,
        output_len: run.osl,
        tpot_def: TpotDef::Itl,
        client,
    };
    let r = sweep(s, &[run.concurrency], w)?;
    let p = &r.points[0];
    // The least time any decode step of this model takes here: one sequence, weights read
    // once at full bandwidth. No batching makes a step faster, whatever the run's real
    // in-flight count (which the sweep may map wrongly).
    let ctx = run.isl as f64 + run.osl as f64 / 2.0;
    let sol = s.sol_evaluator()?;
    let floor = sol.evaluate(&crate::cost::Pass::decode(1.0, ctx)).total;
    Ok(Predicted {
        tpot: p.tpot_itl_ms * 1e-3,
        ttft: p.ttft_ms * 1e-3,
        floor,
        sol_at_batch: p.sol_tpot_ms * 1e-3,
        decode_batch: p.decode_batch,
        first_token_floor: first_token_floor(&sol, run, &client),
    })
}

/// The least time any first token of `run` takes on the configuration `sol` prices at the
/// speed of light (the one that prefills it), seconds, and the prompt it is of, tokens: the
/// shortest prompt its client sends (the file's input length, or the least a client drawing
/// lengths from [r L, L] draws), prefilled alone.
pub(crate) fn first_token_floor(
    sol: &crate::cost::Evaluator,
    run: &E2eRun,
    client: &crate::serve::ClientModel,
) -> (f64, f64) {
    let prompt = match client.lengths {
        crate::serve::Lengths::Varied => (client.range_ratio * run.isl as f64).floor(),
        crate::serve::Lengths::Fixed => run.isl as f64,
    }
    .max(1.0);
    let floor = sol
        .evaluate(&crate::cost::Pass::prefill(1.0, prompt, 0.0))
        .total;
    (floor, prompt)
}

/// Why a run whose measured TTFT (`ttft`, s) lies below the speed-of-light prefill of the
/// shortest prompt its client sends (`floor`, s, of `prompt` tokens: [`first_token_floor`])
/// is not predicted: no first token of that prompt, on that configuration, comes sooner (a
/// prompt served from a prefix cache the file does not record, or a wrong value).
pub(crate) fn ttft_below_sol(ttft: f64, (floor, prompt): (f64, f64)) -> Option<String> {
    (ttft < floor).then(|| {
        format!(
            "measured TTFT below the speed-of-light prefill of the configuration it maps to \
             ({:.3} ms measured, {:.3} ms to prefill one {prompt:.0}-token prompt at the speed \
             of light): a prefix cache the file does not record, or a wrong value; not predicted",
            ttft * 1e3,
            floor * 1e3
        )
    })
}

/// Why `run` cannot be predicted on `s` as mapped, when its measured TPOT lies below the
/// speed-of-light step of its decoding batch ([`below_sol_at_batch`]); None when it can.
pub(crate) fn faster_than_its_batch(
    s: &Scenario,
    run: &E2eRun,
    client: crate::serve::ClientModel,
) -> Result<Option<String>> {
    let p = predict(s, run, client)?;
    Ok(below_sol_at_batch(run.tpot, p.sol_at_batch, p.decode_batch))
}

/// The start of the reason a run measured faster than its mapped batch allows is skipped.
const BELOW_SOL_AT_BATCH: &str = "measured TPOT below the speed-of-light decode step";

/// Why a run whose measured TPOT (`tpot`, s) lies below the speed-of-light step of the batch
/// it maps to (`sol`, s, at `batch` sequences) is not predicted: no step of that batch can be
/// that fast, so the run did not decode what the file says (fewer sequences at once, behind
/// a cap it does not record; several tokens a step, from a speculation it does not record;
/// or a smaller KV cache than its precision maps to). A prediction for the configuration as
/// mapped would be compared with a run of another.
pub(crate) fn below_sol_at_batch(tpot: f64, sol: f64, batch: f64) -> Option<String> {
    (tpot < sol).then(|| {
        format!(
            "{BELOW_SOL_AT_BATCH} of the configuration it maps to ({:.3} ms measured, \
             {:.3} ms at the speed of light with {batch:.0} sequences decoding)",
            tpot * 1e3,
            sol * 1e3
        )
    })
}

/// A run's TPOT below a fifth of the fastest step the hardware allows is a wrong value or
/// unit in the file, refused. A fifth, not the step itself: speculative decoding emits
/// several tokens per step, and the run does not say whether it used it.
pub(crate) const REFUSE_BELOW_SOL: f64 = 0.2;

/// Evaluate every run with the user's `--set` overrides (`sets`, applied to every run's
/// model, system, GPU, interconnect and engine); `source` labels the record and
/// `client` names the benchmark client in place of the mapping's (`--client`); `group_by` the
/// fields the error summary is grouped by (none: one group of every run).
pub fn evaluate(
    runs: &[E2eRun],
    source: &str,
    sets: &[Override],
    client: Option<&str>,
    group_by: &[GroupField],
) -> Result<E2eValidation> {
    let mut resolver = Resolver::new()?;
    let mut harnesses: BTreeMap<String, HarnessUse> = BTreeMap::new();
    let mut tally = Tally::default();
    let repeats = repeated_lines(runs, |r| r.line, E2eRun::fields_without_line);
    let relabelled = relabelled_lines(runs);
    for ((run, repeat), relabel) in runs.iter().zip(repeats).zip(relabelled) {
        let resolved = resolver.resolve(run, sets, client)?;
        harnesses
            .entry(run.campaign.clone())
            .or_insert(HarnessUse {
                campaign: run.campaign.clone(),
                client: resolved.client_name.clone(),
                how: resolved.client_how,
                runs: 0,
            })
            .runs += 1;
        let attempt = (|| -> std::result::Result<RunRow, String> {
            if repeat.is_some() {
                return Err(REPEAT_REASON.to_string());
            }
            if relabel.is_some() {
                return Err(RELABEL_REASON.to_string());
            }
            let model = resolved.model?;
            let system = resolved.system?;
            let parallel = layout(run, model.moe().is_some())?;
            let s = Scenario::new(&model, system, parallel).map_err(|e| e.to_string())?;
            let p = predict(&s, run, resolved.client).map_err(|e| e.to_string())?;
            tally.check_floor(run.line, run.tpot, p.floor, &system.spec.name);
            if let Some(why) = below_sol_at_batch(run.tpot, p.sol_at_batch, p.decode_batch) {
                return Err(why);
            }
            if let Some(why) = ttft_below_sol(run.ttft, p.first_token_floor) {
                return Err(why);
            }
            Ok(RunRow::new(
                run,
                &model.name,
                &system.spec.name,
                parallel.to_string(),
                &resolved.client_name,
                p.tpot,
                p.ttft,
            ))
        })();
        tally.add(run.line, attempt);
    }
    tally.finish(
        source,
        runs.len(),
        group_by,
        harnesses.into_values().collect(),
    )
}

/// What one run maps to: its model and system (or the reason it cannot be mapped), and the
/// client that measured it.
pub(crate) struct Resolved<'r> {
    pub model: std::result::Result<ModelSpec, String>,
    pub system: std::result::Result<&'r System, String>,
    pub client: crate::serve::ClientModel,
    pub client_name: String,
    /// How the client was chosen: "--client", "mapped" (from the run's campaign) or
    /// "default" (the campaign's harness is unknown).
    pub client_how: &'static str,
}

/// Maps runs to rooftop's descriptions through `configs/e2e/models.toml`, loading each
/// model, system and client once.
pub(crate) struct Resolver {
    map: E2eMap,
    clients: BTreeMap<String, crate::spec::client::ClientSpec>,
    loaded: Loaded,
    /// The engines whose rules depend on their release.
    released: BTreeMap<String, bool>,
}

impl Resolver {
    pub(crate) fn new() -> Result<Resolver> {
        let map = E2eMap::builtin()?;
        let released = map
            .engines
            .values()
            .map(|e| {
                let bound = registry::load_engine(e).is_ok_and(|f| f.release.is_some());
                (e.clone(), bound)
            })
            .collect();
        Ok(Resolver {
            map,
            clients: BTreeMap::new(),
            loaded: Loaded::default(),
            released,
        })
    }

    /// `run` under the user's `--set` overrides `sets`, measured by `client` (`--client`)
    /// or by the client its campaign maps to. A description that no longer loads after the
    /// user's `--set` is the outer error; a run rooftop cannot map gives its reason inside.
    pub(crate) fn resolve(
        &mut self,
        run: &E2eRun,
        sets: &[Override],
        client: Option<&str>,
    ) -> Result<Resolved<'_>> {
        let (name, how) = match client {
            Some(c) => (c.to_string(), "--client"),
            None => match self.map.client_of(run) {
                (c, true) => (c.to_string(), "mapped"),
                (c, false) => (c.to_string(), "default"),
            },
        };
        if !self.clients.contains_key(&name) {
            let c = registry::load_client(&name)?;
            self.clients.insert(name.clone(), c);
        }
        let mut model = self.loaded.model(&self.map, run, sets)?;
        // An engine whose rules depend on its release runs at the run's recorded version,
        // where the run records one.
        let released = &self.released;
        let gpus = run.tp * run.attention_dp * run.pp;
        // The server as the client's launch scripts started it for this model.
        let spec = &self.clients[&name];
        let launch = model.as_ref().ok().map(|m| (spec, m));
        let system = self
            .loaded
            .system(&self.map, run, sets, gpus, launch, |engine| {
                let versioned = released.get(engine).copied().unwrap_or(false)
                    && crate::spec::engine::Release::parse(&run.backend_version).is_some();
                if versioned {
                    format!("{engine}@{}", run.backend_version.trim())
                } else {
                    engine.to_string()
                }
            })?;
        // The model as the launch scripts serve it (their KV-cache type), and the client as
        // it ran against this engine and model: its launch scripts' scheduler settings
        // included.
        if let (Ok(m), Ok(s)) = (&mut model, &system) {
            spec.launch_model(s, m);
        }
        let run_client = match (&model, &system) {
            (Ok(m), Ok(s)) => spec.model_for(s, m),
            _ => spec.model(),
        };
        Ok(Resolved {
            model,
            system,
            client: run_client,
            client_name: name,
            client_how: how,
        })
    }
}

/// The models and systems an evaluation's runs name, each loaded once.
#[derive(Default)]
pub(crate) struct Loaded {
    models: BTreeMap<(String, String, String, String), std::result::Result<ModelSpec, String>>,
    systems: BTreeMap<String, System>,
}

impl Loaded {
    /// The model `run` maps to, with the user's `--set` overrides. A description that no
    /// longer loads after the user's `--set` is the user's error and stops the validation
    /// (the outer error); a run rooftop cannot map gives its reason (the inner one).
    pub(crate) fn model(
        &mut self,
        map: &E2eMap,
        run: &E2eRun,
        sets: &[Override],
    ) -> Result<std::result::Result<ModelSpec, String>> {
        let key = (
            run.model_path.clone(),
            run.precision.clone(),
            run.gemm_quant_mode.clone(),
            run.moe_quant_mode.clone(),
        );
        if let Some(why) = map.speculation(run) {
            return Ok(Err(why));
        }
        if !self.models.contains_key(&key) {
            let m = match map.model(run) {
                Ok(m) => Ok(with_user_sets(m, sets)?),
                Err(why) => Err(why),
            };
            self.models.insert(key.clone(), m);
        }
        Ok(self.models[&key].clone())
    }

    /// The system `run` maps to, with its backend's engine as `engine_of` names it (the
    /// mapping's engine given) and the user's `--set` overrides, and with the kernel
    /// libraries the client's launch scripts select for the model (`launch`: the client and
    /// the model's name); the errors as [`Loaded::model`]'s.
    pub(crate) fn system(
        &mut self,
        map: &E2eMap,
        run: &E2eRun,
        sets: &[Override],
        gpus: u32,
        launch: Option<(&crate::spec::client::ClientSpec, &ModelSpec)>,
        engine_of: impl Fn(&str) -> String,
    ) -> Result<std::result::Result<&System, String>> {
        let (names, engine) = match (map.system(run), map.engines.get(&run.backend)) {
            (Ok(names), Some(engine)) => (names, engine_of(engine)),
            (Err(why), _) => return Ok(Err(why)),
            (_, None) => {
                return Ok(Err(format!(
                    "backend \"{}\" not in {MODELS_LABEL}",
                    run.backend
                )))
            }
        };
        // The first system with GPUs enough for the run's layout; the last when none has
        // (the layout check then says how many it needs).
        let needs = gpus.max(1);
        let mut chosen = String::new();
        for name in names {
            let key = format!("{name}|{engine}");
            if !self.systems.contains_key(&key) {
                let sys = System::load_with_engine(name, Some(&engine), sets)?;
                self.systems.insert(key.clone(), sys);
            }
            chosen = key;
            if self.systems[&chosen].spec.gpu_count >= needs {
                break;
            }
        }
        if let Some((client, model)) = launch {
            // A launch entry may name the checkpoint (`weights`): one model name can be
            // launched differently per default weight format.
            let key = format!(
                "{chosen}|{}|{}|{:?}",
                client.name, model.name, model.quantization.default.kind
            );
            if !self.systems.contains_key(&key) {
                let base = &self.systems[&chosen];
                let sys = client.launched(base, model).unwrap_or_else(|| base.clone());
                self.systems.insert(key.clone(), sys);
            }
            chosen = key;
        }
        Ok(Ok(&self.systems[&chosen]))
    }
}

impl RunRow {
    /// `run`'s row: predicted as `tpot` and `ttft` (seconds) for `model` on `system` laid out
    /// as `parallel`, with the client `client`.
    pub(crate) fn new(
        run: &E2eRun,
        model: &str,
        system: &str,
        parallel: String,
        client: &str,
        tpot: f64,
        ttft: f64,
    ) -> RunRow {
        RunRow {
            line: run.line,
            backend: run.backend.clone(),
            backend_version: run.backend_version.clone(),
            model_path: run.model_path.clone(),
            model: model.to_string(),
            precision: run.precision.clone(),
            system: system.to_string(),
            parallel,
            isl: run.isl,
            osl: run.osl,
            concurrency: run.concurrency,
            campaign: run.campaign.clone(),
            image: run.image.trim().to_string(),
            client: client.to_string(),
            measured_tpot_ms: run.tpot * 1e3,
            predicted_tpot_ms: tpot * 1e3,
            tpot_error: (tpot - run.tpot) / run.tpot,
            measured_ttft_ms: run.ttft * 1e3,
            predicted_ttft_ms: ttft * 1e3,
            ttft_error: (ttft - run.ttft) / run.ttft,
        }
    }
}

/// What an evaluation gathers run by run: the rows, the runs skipped by reason, and the
/// first run measured faster than its hardware allows.
#[derive(Default)]
pub(crate) struct Tally {
    rows: Vec<RunRow>,
    skipped: BTreeMap<String, Skipped>,
    /// (line, TPOT, bound, system), seconds.
    impossible: Option<(usize, f64, f64, String)>,
}

impl Tally {
    /// Note the run at `line` measured at `tpot` against `sol`, the fastest decode step its
    /// model can take on `system` (seconds): below [`REFUSE_BELOW_SOL`] of it, the first such
    /// run is refused when the evaluation finishes.
    pub(crate) fn check_floor(&mut self, line: usize, tpot: f64, sol: f64, system: &str) {
        if tpot < REFUSE_BELOW_SOL * sol && self.impossible.is_none() {
            self.impossible = Some((line, tpot, sol, system.to_string()));
        }
    }

    /// The run at `line`: its row, or the reason it is skipped (counted by its general form).
    pub(crate) fn add(&mut self, line: usize, attempt: std::result::Result<RunRow, String>) {
        match attempt {
            Ok(r) => self.rows.push(r),
            Err(reason) => {
                let key = generalise(&reason);
                self.skipped
                    .entry(key.clone())
                    .or_insert(Skipped {
                        reason: key,
                        runs: 0,
                        first_line: line,
                    })
                    .runs += 1;
            }
        }
    }

    /// The record of `source` (`total_runs` runs), or the error naming its first impossible
    /// run.
    pub(crate) fn finish(
        self,
        source: &str,
        total_runs: usize,
        group_by: &[GroupField],
        harnesses: Vec<HarnessUse>,
    ) -> Result<E2eValidation> {
        if let Some((line, tpot, sol, system)) = self.impossible {
            return Err(Error::Measured {
                file: source.to_string(),
                line: Some(line),
                message: format!(
                    "silicon_tpot_ms {} ms is below a fifth of the fastest decode step this \
                     model can take on {system} ({:.3} ms at the speed of light, one sequence; \
                     a fifth leaves room for speculative decoding's tokens per step): no run \
                     can be; check the value and its unit",
                    tpot * 1e3,
                    sol * 1e3
                ),
            });
        }
        Ok(summarise(
            source,
            total_runs,
            self.rows,
            group_by,
            harnesses,
            self.skipped,
        ))
    }
}

/// The error summary of evaluated `rows` of a file of `total_runs` runs: grouped by the
/// fields of `group_by` (each once, in order), overall, with the clients used and the
/// skipped runs by reason (most first).
pub fn summarise(
    source: &str,
    total_runs: usize,
    rows: Vec<RunRow>,
    group_by: &[GroupField],
    harnesses: Vec<HarnessUse>,
    skipped: BTreeMap<String, Skipped>,
) -> E2eValidation {
    // Each field once, in the order asked.
    let mut fields: Vec<GroupField> = Vec::new();
    for f in group_by {
        if !fields.contains(f) {
            fields.push(*f);
        }
    }
    let mut grouped: BTreeMap<Vec<String>, Vec<&RunRow>> = BTreeMap::new();
    for r in &rows {
        grouped
            .entry(fields.iter().map(|f| f.of(r)).collect())
            .or_default()
            .push(r);
    }
    let summary = |rs: &[&RunRow], f: fn(&RunRow) -> f64| {
        ErrorSummary::of(&rs.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let groups = grouped
        .iter()
        .map(|(values, rs)| {
            let named = |field: GroupField| {
                fields
                    .iter()
                    .position(|f| *f == field)
                    .map_or("*".to_string(), |i| values[i].clone())
            };
            GroupRow {
                backend: named(GroupField::Backend),
                system: named(GroupField::System),
                model: named(GroupField::Model),
                key: fields
                    .iter()
                    .zip(values)
                    .map(|(f, v)| (f.name().to_string(), v.clone()))
                    .collect(),
                tpot: summary(rs, |r| r.tpot_error),
                ttft: summary(rs, |r| r.ttft_error),
            }
        })
        .collect();
    let all: Vec<&RunRow> = rows.iter().collect();
    let mut skipped: Vec<Skipped> = skipped.into_values().collect();
    skipped.sort_by_key(|s| std::cmp::Reverse(s.runs));
    E2eValidation {
        source: source.to_string(),
        total_runs,
        overall_tpot: summary(&all, |r| r.tpot_error),
        overall_ttft: summary(&all, |r| r.ttft_error),
        group_by: fields,
        groups,
        harnesses,
        skipped,
        runs: rows,
    }
}

/// A skip reason with the run's own figures replaced, so equal reasons count together.
pub(crate) fn generalise(reason: &str) -> String {
    if reason.starts_with(BELOW_SOL_AT_BATCH) {
        return format!(
            "{BELOW_SOL_AT_BATCH} of the configuration it maps to, at its decoding batch: it \
             decoded fewer sequences at once than its concurrency says (a cap the file does \
             not record), several tokens a step (a speculation it does not record) or from a \
             smaller KV cache than its precision maps to; not predicted"
        );
    }
    if let Some(i) = reason.find("does not fit") {
        return reason[i..]
            .split(':')
            .next()
            .unwrap_or("does not fit")
            .to_string()
            + ": weights or one sequence's KV cache exceed the GPUs' memory";
    }
    reason.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(model: &str, precision: &str, tp: u32, dp: u32, moe_tp: u32, moe_ep: u32) -> E2eRun {
        E2eRun {
            line: 2,
            backend: "vllm".into(),
            backend_version: String::new(),
            model_path: model.into(),
            system: "b200".into(),
            precision: precision.into(),
            gemm_quant_mode: "nvfp4".into(),
            moe_quant_mode: "nvfp4".into(),
            isl: 1024,
            osl: 128,
            batch_size: 8,
            concurrency: 8 * dp,
            campaign: String::new(),
            image: String::new(),
            tp,
            pp: 1,
            attention_dp: dp,
            moe_tp,
            moe_ep,
            ttft: 0.1,
            tpot: 0.01,
        }
    }

    #[test]
    fn layouts_rooftop_cannot_express_are_refused() {
        assert!(layout(&run("x", "", 4, 1, 1, 4), true).is_ok_and(|p| p.ep == 4 && p.tp == 4));
        assert!(layout(&run("x", "", 4, 1, 2, 4), true).is_err());
        assert!(layout(&run("x", "", 4, 1, 0, 4), true).is_err());
        // Dense models ignore the MoE degrees.
        assert!(layout(&run("x", "", 8, 1, 1, 1), false).is_ok_and(|p| p.ep == 1));
    }

    /// A run on an image that serves only speculating configs is set aside, whatever it
    /// measured; the same model on the plain config's image, or on an image that merely
    /// shares a prefix, is predicted; every listed model has a description.
    #[test]
    fn runs_on_speculating_images_are_set_aside_by_image_not_by_measurement() {
        let map = E2eMap::builtin().unwrap();
        let on = |backend: &str, model: &str, image: &str| {
            let mut r = run(model, "fp8", 8, 1, 8, 1);
            r.backend = backend.into();
            r.image = image.into();
            map.speculation(&r)
        };
        let why = on(
            "trtllm",
            "deepseek-ai/DeepSeek-R1",
            "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3",
        )
        .unwrap();
        assert!(why.contains("MTP") && why.contains("acceptance"), "{why}");
        assert!(on(
            "trtllm",
            "deepseek-ai/DeepSeek-R1",
            "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3"
        )
        .is_some());
        assert!(on(
            "trtllm",
            "deepseek-ai/DeepSeek-R1",
            "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2"
        )
        .is_none());
        let qwen = "Qwen/Qwen3.5-397B-A17B";
        assert!(on("sglang", qwen, "lmsysorg/sglang:v0.5.9-cu130").is_some());
        assert!(on("sglang", qwen, "lmsysorg/sglang:v0.5.9-cu130-amd64").is_none());
        // An image shared by a plain and a speculating config says nothing.
        assert!(on(
            "sglang",
            "deepseek-ai/DeepSeek-R1",
            "lmsysorg/sglang:v0.5.9-cu130"
        )
        .is_none());
        assert!(on("vllm", qwen, "lmsysorg/sglang:v0.5.9-cu130").is_none());
        assert!(on("sglang", qwen, "").is_none());
        for s in &map.speculative {
            assert!(!s.source.is_empty());
            for id in &s.hf_ids {
                assert!(map.models.iter().any(|m| m.hf_id == *id), "{id}");
            }
        }
    }

    #[test]
    fn models_map_through_data_and_unknown_ones_are_refused() {
        let map = E2eMap::builtin().unwrap();
        let m = map
            .model(&run("deepseek-ai/DeepSeek-V3", "fp4", 8, 1, 8, 1))
            .unwrap();
        assert_eq!(m.quantization.routed_experts().to_string(), "nvfp4");
        assert_eq!(m.quantization.attention().to_string(), "nvfp4");
        // The published gpt-oss checkpoint keeps its MXFP4 experts.
        let g = map
            .model(&run("openai/gpt-oss-120b", "fp4", 8, 1, 8, 1))
            .unwrap();
        assert_eq!(g.quantization.routed_experts().to_string(), "mxfp4");
        let e = map
            .model(&run("nvidia/Qwen3-32B-NVFP4", "fp4", 8, 1, 8, 1))
            .unwrap_err();
        assert!(
            e.contains("no description of nvidia/Qwen3-32B-NVFP4"),
            "{e}"
        );
    }

    /// A precision the mapping names a KV format for stores that format; others keep the
    /// built-in's, and a native precision still gets its KV format (nothing else changes).
    #[test]
    fn a_precisions_kv_cache_comes_from_the_mapping() {
        use crate::spec::KvDtype;
        let mut map = E2eMap::builtin().unwrap();
        let llama = "meta-llama/Llama-3.1-70B";
        let kv = |map: &E2eMap, p: &str| map.model(&run(llama, p, 8, 1, 1, 1)).unwrap();
        assert_eq!(kv(&map, "fp8").quantization.kv_cache, KvDtype::Fp8);
        assert_eq!(kv(&map, "fp4").quantization.kv_cache, KvDtype::Fp8);
        assert_eq!(kv(&map, "bf16").quantization.kv_cache, KvDtype::Bf16);
        // On a native precision only the KV format moves.
        let entry = map.models.iter_mut().find(|m| m.hf_id == llama).unwrap();
        entry.native_precision = vec!["fp8".into()];
        let native = kv(&map, "fp8");
        let builtin = registry::load_model("llama-3.1-70b-fp8").unwrap();
        assert_eq!(native.quantization.kv_cache, KvDtype::Fp8);
        assert_eq!(
            native.quantization.attention(),
            builtin.quantization.attention()
        );
    }

    /// The client comes from the run's campaign: named ones by the mapping, `ci-*` by its
    /// prefix, and an unknown or missing campaign gets the default.
    #[test]
    fn the_client_comes_from_the_campaign() {
        let map = E2eMap::builtin().unwrap();
        let mut r = run("x", "", 8, 1, 1, 1);
        for (campaign, client, known) in [
            ("ci-export-2026-04-06", "inferencemax", true),
            ("ci-db-dump", "inferencemax", true),
            ("gap-analysis", map.client.as_str(), false),
            ("", map.client.as_str(), false),
        ] {
            r.campaign = campaign.into();
            assert_eq!(map.client_of(&r), (client, known), "{campaign}");
        }
    }

    #[test]
    fn summary_quantiles() {
        let s = ErrorSummary::of(&[-0.1, 0.2, 0.3]);
        assert_eq!(s.n, 3);
        assert!((s.median_abs - 0.2).abs() < 1e-12);
        assert!((s.bias - 0.2).abs() < 1e-12);
    }
}
