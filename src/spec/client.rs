//! Benchmark clients as descriptions (`configs/clients/<name>.toml`): what the program that
//! measures a server does to the numbers it reports.
//!
//! A harness may hold fewer requests in flight than asked (aiohttp's default connector allows
//! 100 connections), may start every request at once (TTFT then includes waiting behind the
//! other prompts), spends CPU on every streamed chunk, and defines TPOT its own way. The
//! serving loop (`serve::sweep`) reads the numbers as a [`ClientModel`].

use crate::measured::TpotDef;
use crate::units::Seconds;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How requests start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// Requests arrive desynchronized (the serving loop's steady state).
    #[default]
    Steady,
    /// All in-flight requests are sent at once.
    Burst,
    /// Open loop: Poisson arrivals independent of completions.
    Poisson,
}

/// What TTFT the client reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TtftDef {
    /// Time to the first streamed chunk.
    #[default]
    FirstChunk,
}

/// Whether every request has exactly the asked input and output lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lengths {
    /// Every request has the same lengths: prompts prefilled in one step decode in lockstep,
    /// finish in the same step and come back together.
    #[default]
    Fixed,
    /// Lengths are drawn from a range (a random dataset with a range ratio): requests finish
    /// at different steps, so after the first wave they arrive desynchronized.
    Varied,
}

/// One client, read 1:1 from `configs/clients/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    pub name: String,
    pub description: String,
    /// Most simultaneous connections (0: no cap below the concurrency asked for).
    pub connection_cap: u32,
    pub start: Start,
    /// Requests per run (0: each of the C clients loops without end). With a burst start the
    /// first wave of C is a fraction C / num_prompts of the requests.
    pub num_prompts: u32,
    /// Requests per run as a multiple of the concurrency (0: not used; `num_prompts` applies).
    /// A harness that sweeps C with `--num-prompts` scaled to it sends this many waves.
    #[serde(default)]
    pub prompts_per_concurrency: u32,
    /// Whether request lengths are fixed or drawn from a range.
    #[serde(default)]
    pub lengths: Lengths,
    /// With drawn lengths, each is uniform in `[range_ratio · L, L]` (the random dataset's
    /// `--random-range-ratio`); 1 with fixed lengths.
    #[serde(default = "one")]
    pub range_ratio: f64,
    /// The harness starts the server with its concurrency as the scheduler's limit
    /// (`--max-num-seqs C`): the engine's own default never binds below C.
    #[serde(default)]
    pub sets_max_num_seqs: bool,
    /// Client CPU per received chunk (one process: a bound on the token rate it can count).
    pub per_chunk_cpu: Seconds,
    pub tpot: TpotDef,
    pub ttft: TtftDef,
    /// Server settings the harness's launch scripts give the engines it starts, by engine,
    /// model and concurrency: part of how its runs were made.
    #[serde(default)]
    pub launch: Vec<LaunchFlags>,
    pub sources: BTreeMap<String, String>,
}

fn one() -> f64 {
    1.0
}

/// Settings one of the harness's launch scripts gives the server (`[[launch]]`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LaunchFlags {
    /// The engine the script starts: an engine description's `name` (`sglang`), at any
    /// release.
    pub engine: String,
    /// The models the script serves, by rooftop model name (empty: every model).
    #[serde(default)]
    pub models: Vec<String>,
    /// The client concurrencies the setting is for: `min_concurrency` (0: from the first)
    /// up to `max_concurrency` (absent: no bound), both included.
    #[serde(default)]
    pub min_concurrency: u32,
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// The script starts one server on one node: multi-node systems are launched otherwise.
    #[serde(default)]
    pub single_node: bool,
    /// The GPUs the script is for: matched against the GPU description's `architecture`
    /// (`SM90`; absent: every GPU).
    #[serde(default)]
    pub arch: Option<String>,
    /// The engine releases the script's setting holds for, from `from` (inclusive) to
    /// `before` (exclusive), against the release the run names (`vllm-v1@0.18.0`); a run
    /// that names none takes the setting.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub before: Option<String>,
    /// The scheduler's poll interval in decode steps (SGLang's `--scheduler-recv-interval`).
    #[serde(default)]
    pub scheduler_recv_interval: Option<u32>,
    /// Fused-MoE library per weight-format key the script makes the engine run (vLLM's
    /// `VLLM_MXFP4_USE_MARLIN=1`: `{ mxfp4 = "marlin" }`): the engine's `moe_library`.
    #[serde(default)]
    pub moe_library: BTreeMap<String, String>,
    /// The checkpoints the script serves, by the model's default weight format (`fp8`,
    /// `nvfp4`, ...; empty: every checkpoint of the named models).
    #[serde(default)]
    pub weights: Vec<crate::spec::model::FormatKind>,
    /// The KV-cache element type the script sets (`--kv-cache-dtype fp8_e4m3`): the
    /// model's `quantization.kv_cache` for the runs it starts.
    #[serde(default)]
    pub kv_cache: Option<crate::spec::model::KvDtype>,
    /// Context balancing over data-parallel attention ranks the script turns on
    /// (TensorRT-LLM's `attention_dp_config` with `enable_balance: true`): the engine's
    /// `attention_dp_balance`.
    #[serde(default)]
    pub attention_dp_balance: Option<crate::spec::engine::AttentionDpBalance>,
    /// The per-step token budget the script sets as a multiple of the requests' input
    /// length (`--max-num-batched-tokens "$((ISL * 2))"`: 2), in place of the engine's
    /// `max_num_batched_tokens`.
    #[serde(default)]
    pub max_num_batched_tokens_per_input: Option<u32>,
    /// The per-step token budget the script sets (SGLang's `--chunked-prefill-size` with
    /// `--max-prefill-tokens`, vLLM's `--max-num-batched-tokens`): the engine's
    /// `max_num_batched_tokens`.
    #[serde(default)]
    pub max_num_batched_tokens: Option<u32>,
    /// Batch waiting the script turns on (TensorRT-LLM's `batch_wait_timeout_iters` and
    /// `batch_wait_max_tokens_ratio`): the engine's `batch_wait`, for the runs the entry's
    /// concurrencies, request lengths and `max_tp` name.
    #[serde(default)]
    pub batch_wait: Option<crate::spec::engine::BatchWait>,
    /// The requests' input and output lengths the script sets `batch_wait` for (the
    /// harness's ISL and OSL; absent: every length), and the largest tensor-parallel degree
    /// (absent: every degree). They qualify `batch_wait` only: the other settings are made
    /// before a run's lengths and layout are known.
    #[serde(default)]
    pub input_len: Option<u32>,
    #[serde(default)]
    pub output_len: Option<u32>,
    #[serde(default)]
    pub max_tp: Option<u32>,
}

/// The most input lengths a launch script's token budget may name: a bound on a typo.
pub const MAX_BUDGET_PER_INPUT: u32 = 64;

/// The most tokens a step a launch script's budget may name (SGLang's launch scripts use up
/// to 131,072): a bound on a typo.
pub const MAX_LAUNCH_BUDGET: u32 = 1 << 22;

impl LaunchFlags {
    /// Whether the script starts a server of `engine` (its resolved name, `name@release`)
    /// serving `model` on `system`.
    fn applies_to(
        &self,
        engine: &str,
        model: &crate::spec::ModelSpec,
        system: &crate::spec::System,
    ) -> bool {
        let base = engine.split('@').next().unwrap_or(engine);
        self.engine == base
            && (self.models.is_empty() || self.models.contains(&model.name))
            && (self.weights.is_empty() || self.weights.contains(&model.quantization.default.kind))
            && (!self.single_node || system.spec.node_count() <= 1)
            && self
                .arch
                .as_ref()
                .is_none_or(|a| system.gpu.architecture.contains(a.as_str()))
            && crate::spec::engine::holds_for(engine, &self.from, &self.before)
    }
}

/// Most `[[launch]]` entries a client may hold (a bound that keeps [`ClientModel`] a value).
pub const MAX_LAUNCH_RULES: usize = 32;

/// Most `[[launch]]` entries that set a poll interval, and most that set batch waiting (each
/// kept in a fixed array of the client's).
pub const MAX_RECV_RULES: usize = 16;
pub const MAX_BATCH_WAIT_RULES: usize = 4;

/// The poll intervals a harness's launch scripts set for one engine and model, by
/// concurrency: `(min_concurrency, max_concurrency, interval)`, the first that holds wins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RecvIntervals {
    len: usize,
    rules: [(u32, u32, u32); MAX_RECV_RULES],
}

impl RecvIntervals {
    /// No launch setting: the engine description's interval holds at every concurrency.
    pub const NONE: RecvIntervals = RecvIntervals {
        len: 0,
        rules: [(0, 0, 0); MAX_RECV_RULES],
    };

    /// The interval the harness set at concurrency `c` (None: the engine's own).
    pub fn at(&self, c: u32) -> Option<u32> {
        self.rules[..self.len]
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&c))
            .map(|r| r.2)
    }
}

/// The batch waiting a harness's launch scripts set for one engine and model, by
/// concurrency, request lengths and tensor-parallel degree; the first that holds wins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchWaits {
    len: usize,
    rules: [BatchWaitRule; MAX_BATCH_WAIT_RULES],
}

/// One `[[launch]]` entry's batch waiting and the runs it is for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct BatchWaitRule {
    min_concurrency: u32,
    max_concurrency: u32,
    input_len: Option<u32>,
    output_len: Option<u32>,
    max_tp: u32,
    wait: crate::spec::engine::BatchWait,
}

impl BatchWaits {
    /// No launch setting: the engine description's batch waiting holds.
    pub const NONE: BatchWaits = BatchWaits {
        len: 0,
        rules: [BatchWaitRule {
            min_concurrency: 0,
            max_concurrency: 0,
            input_len: None,
            output_len: None,
            max_tp: 0,
            wait: crate::spec::engine::BatchWait {
                timeout_iters: 0,
                max_tokens_ratio: 0.0,
            },
        }; MAX_BATCH_WAIT_RULES],
    };

    /// The batch waiting the harness set at concurrency `c`, for requests of `input` and
    /// `output` tokens on `tp` tensor-parallel GPUs (None: the engine's own).
    pub fn at(
        &self,
        c: u32,
        input: u32,
        output: u32,
        tp: u32,
    ) -> Option<crate::spec::engine::BatchWait> {
        self.rules[..self.len]
            .iter()
            .find(|r| {
                (r.min_concurrency..=r.max_concurrency).contains(&c)
                    && r.input_len.is_none_or(|l| l == input)
                    && r.output_len.is_none_or(|l| l == output)
                    && tp <= r.max_tp
            })
            .map(|r| r.wait)
    }
}

/// The numbers the serving loop reads from a client.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClientModel {
    /// Most requests in flight (None: no cap).
    pub cap: Option<u32>,
    pub start: Start,
    /// Requests per run (None: unbounded).
    pub num_prompts: Option<u32>,
    /// Requests per run as a multiple of C, in place of `num_prompts` when set.
    pub prompts_per_concurrency: Option<u32>,
    pub lengths: Lengths,
    /// Drawn lengths are uniform in `[range_ratio · L, L]` (1: fixed).
    pub range_ratio: f64,
    /// The server was started with `--max-num-seqs C`.
    pub sets_max_num_seqs: bool,
    /// Seconds of client CPU per streamed chunk.
    pub per_chunk: f64,
    /// The scheduler poll intervals the harness's launch scripts set for this engine and
    /// model (none: the engine description's).
    pub recv_intervals: RecvIntervals,
    /// The per-step token budget the launch scripts set, as a multiple of the input length
    /// (None: the engine's `max_num_batched_tokens`).
    pub budget_per_input: Option<u32>,
    /// The batch waiting the launch scripts set for this engine and model (none: the
    /// engine description's).
    pub batch_waits: BatchWaits,
}

impl ClientModel {
    /// A closed loop of C users with no cap, in steady state, costing nothing.
    pub const IDEAL: ClientModel = ClientModel {
        cap: None,
        start: Start::Steady,
        num_prompts: None,
        prompts_per_concurrency: None,
        lengths: Lengths::Fixed,
        range_ratio: 1.0,
        sets_max_num_seqs: false,
        per_chunk: 0.0,
        recv_intervals: RecvIntervals::NONE,
        budget_per_input: None,
        batch_waits: BatchWaits::NONE,
    };

    /// Requests in a run at concurrency `c` (None: unbounded, each client looping).
    pub fn prompts(&self, c: u32) -> Option<u64> {
        match (self.prompts_per_concurrency, self.num_prompts) {
            (Some(k), _) => Some(k as u64 * c as u64),
            (None, Some(n)) => Some(n as u64),
            (None, None) => None,
        }
    }

    /// Clients that send at concurrency `c`: `c`, but never more than the run's prompts (a
    /// run of 1,000 prompts at C = 2,000 has 1,000 requests, all of them in flight at once).
    pub fn senders(&self, c: u32) -> u32 {
        let sent = self
            .prompts(c)
            .map_or(u32::MAX, |n| n.min(u32::MAX as u64) as u32);
        c.min(sent).max(1)
    }

    /// Requests the client has in flight at most at concurrency `c`: its senders, held to
    /// its connection cap (the others wait for a connection, in their TTFT).
    pub fn in_flight(&self, c: u32) -> u32 {
        self.senders(c).min(self.cap.unwrap_or(u32::MAX)).max(1)
    }

    /// The mean of a length `l` as the client draws it: `l` when fixed, the middle of the
    /// whole-token range `[floor(range_ratio · l), l]` when drawn.
    pub fn mean_length(&self, l: f64) -> f64 {
        match self.lengths {
            Lengths::Fixed => l,
            Lengths::Varied => 0.5 * ((self.range_ratio * l).floor().max(1.0) + l.max(1.0)),
        }
    }

    /// The fraction of a run's requests that the first wave of `c` is (0 when unbounded).
    pub fn first_wave_share(&self, c: u32) -> f64 {
        match self.prompts(c) {
            Some(n) => (c as f64 / n as f64).min(1.0),
            None => 0.0,
        }
    }
}

impl Default for ClientModel {
    fn default() -> Self {
        ClientModel::IDEAL
    }
}

impl ClientSpec {
    pub fn validate(&self) -> Result<(), (String, String)> {
        let c = self.per_chunk_cpu.0;
        if !(c.is_finite() && (0.0..=1.0).contains(&c)) {
            return Err(("per_chunk_cpu".into(), "a time of at most 1 s".into()));
        }
        if self.prompts_per_concurrency > 0 && self.num_prompts > 0 {
            return Err((
                "prompts_per_concurrency".into(),
                "0 when num_prompts is set (a run's size is one or the other)".into(),
            ));
        }
        let r = self.range_ratio;
        match self.lengths {
            Lengths::Fixed if r != 1.0 => {
                return Err(("range_ratio".into(), "1 with fixed lengths".into()));
            }
            Lengths::Varied if !(r.is_finite() && r > 0.0 && r < 1.0) => {
                return Err((
                    "range_ratio".into(),
                    "a fraction in (0, 1) with drawn lengths".into(),
                ));
            }
            _ => {}
        }
        if self.launch.len() > MAX_LAUNCH_RULES {
            return Err((
                "launch".into(),
                format!("at most {MAX_LAUNCH_RULES} [[launch]] entries"),
            ));
        }
        for (field, n, max) in [
            (
                "scheduler_recv_interval",
                self.launch
                    .iter()
                    .filter(|l| l.scheduler_recv_interval.is_some())
                    .count(),
                MAX_RECV_RULES,
            ),
            (
                "batch_wait",
                self.launch
                    .iter()
                    .filter(|l| l.batch_wait.is_some())
                    .count(),
                MAX_BATCH_WAIT_RULES,
            ),
        ] {
            if n > max {
                return Err((
                    "launch".into(),
                    format!("at most {max} [[launch]] entries that set {field}"),
                ));
            }
        }
        for (i, l) in self.launch.iter().enumerate() {
            let max = crate::spec::engine::MAX_RECV_INTERVAL;
            if l.scheduler_recv_interval
                .is_some_and(|n| !(1..=max).contains(&n))
            {
                return Err((
                    format!("launch[{i}].scheduler_recv_interval"),
                    format!("1 to {max} decode steps between polls"),
                ));
            }
            // The settings made before a run's lengths and layout are known.
            let others = l.scheduler_recv_interval.is_some()
                || !l.moe_library.is_empty()
                || l.kv_cache.is_some()
                || l.attention_dp_balance.is_some()
                || l.max_num_batched_tokens_per_input.is_some()
                || l.max_num_batched_tokens.is_some();
            if !others && l.batch_wait.is_none() {
                return Err((
                    format!("launch[{i}]"),
                    "a setting: scheduler_recv_interval, moe_library, kv_cache, \
                     attention_dp_balance, max_num_batched_tokens, \
                     max_num_batched_tokens_per_input or batch_wait"
                        .into(),
                ));
            }
            let shaped = l.input_len.is_some() || l.output_len.is_some() || l.max_tp.is_some();
            if shaped && (l.batch_wait.is_none() || others) {
                return Err((
                    format!("launch[{i}]"),
                    "input_len, output_len and max_tp only with batch_wait alone (the other \
                     settings are made before a run's lengths and layout are known): one \
                     entry for batch_wait, another for the rest"
                        .into(),
                ));
            }
            if let Some(b) = &l.batch_wait {
                b.check(&format!("launch[{i}].batch_wait"))?;
            }
            if l.max_tp == Some(0) || l.input_len == Some(0) || l.output_len == Some(0) {
                return Err((
                    format!("launch[{i}]"),
                    "input_len, output_len and max_tp of at least 1".into(),
                ));
            }
            if l.max_num_batched_tokens
                .is_some_and(|t| !(1..=MAX_LAUNCH_BUDGET).contains(&t))
            {
                return Err((
                    format!("launch[{i}].max_num_batched_tokens"),
                    format!("1 to {MAX_LAUNCH_BUDGET} tokens a step"),
                ));
            }
            if l.max_num_batched_tokens_per_input
                .is_some_and(|k| !(1..=MAX_BUDGET_PER_INPUT).contains(&k))
            {
                return Err((
                    format!("launch[{i}].max_num_batched_tokens_per_input"),
                    format!("1 to {MAX_BUDGET_PER_INPUT} input lengths"),
                ));
            }
            if let Some(b) = &l.attention_dp_balance {
                b.check(&format!("launch[{i}].attention_dp_balance"))?;
            }
            crate::spec::engine::check_bounds(&l.from, &l.before, &format!("launch[{i}]"))?;
            if let Some((f, lib)) = l
                .moe_library
                .iter()
                .find(|(f, lib)| f.trim().is_empty() || lib.trim().is_empty())
            {
                return Err((
                    format!("launch[{i}].moe_library"),
                    format!(
                        "a weight-format key and a library name, e.g. {{ mxfp4 = \"marlin\" }}, \
                         not {{ \"{f}\" = \"{lib}\" }}"
                    ),
                ));
            }
            if l.max_concurrency.is_some_and(|m| m < l.min_concurrency) {
                return Err((
                    format!("launch[{i}].max_concurrency"),
                    "at least min_concurrency".into(),
                ));
            }
            if l.engine.trim().is_empty() {
                return Err((
                    format!("launch[{i}].engine"),
                    "an engine name, e.g. \"sglang\"".into(),
                ));
            }
        }
        Ok(())
    }

    /// The launch scripts' entries that start `system`'s engine serving `model`.
    fn launches<'c>(
        &'c self,
        system: &'c crate::spec::System,
        model: &'c crate::spec::ModelSpec,
    ) -> impl Iterator<Item = &'c LaunchFlags> + 'c {
        self.launch
            .iter()
            .filter(move |l| l.applies_to(&system.engine.name, model, system))
    }

    /// The client as the serving loop reads it for `system`'s engine serving model `model`:
    /// the launch scripts' scheduler settings that apply to it included.
    pub fn model_for(
        &self,
        system: &crate::spec::System,
        model: &crate::spec::ModelSpec,
    ) -> ClientModel {
        let mut m = self.model();
        for l in self.launches(system, model) {
            m.budget_per_input = l.max_num_batched_tokens_per_input.or(m.budget_per_input);
            if let Some(wait) = l.batch_wait {
                let b = &mut m.batch_waits;
                if b.len < MAX_BATCH_WAIT_RULES {
                    b.rules[b.len] = BatchWaitRule {
                        min_concurrency: l.min_concurrency,
                        max_concurrency: l.max_concurrency.unwrap_or(u32::MAX),
                        input_len: l.input_len,
                        output_len: l.output_len,
                        max_tp: l.max_tp.unwrap_or(u32::MAX),
                        wait,
                    };
                    b.len += 1;
                }
            }
            let Some(interval) = l.scheduler_recv_interval else {
                continue;
            };
            let r = &mut m.recv_intervals;
            if r.len < MAX_RECV_RULES {
                r.rules[r.len] = (
                    l.min_concurrency,
                    l.max_concurrency.unwrap_or(u32::MAX),
                    interval,
                );
                r.len += 1;
            }
        }
        m
    }

    /// `system` as the launch scripts start its engine for `model`: the kernel libraries
    /// they select (`moe_library`), the context balancing they turn on
    /// (`attention_dp_balance`) and the token budget they set (`max_num_batched_tokens`)
    /// set on the engine. `None` when no script changes it.
    pub fn launched(
        &self,
        system: &crate::spec::System,
        model: &crate::spec::ModelSpec,
    ) -> Option<crate::spec::System> {
        let e = &system.engine;
        let mut libraries = e.moe_library.clone();
        let mut balance = e.attention_dp_balance;
        let mut budget = e.max_num_batched_tokens;
        for l in self.launches(system, model) {
            libraries.extend(l.moe_library.iter().map(|(f, b)| (f.clone(), b.clone())));
            balance = l.attention_dp_balance.or(balance);
            budget = l.max_num_batched_tokens.unwrap_or(budget);
        }
        (libraries != e.moe_library
            || balance != e.attention_dp_balance
            || budget != e.max_num_batched_tokens)
            .then(|| {
                let mut s = system.clone();
                s.engine.moe_library = libraries;
                s.engine.attention_dp_balance = balance;
                s.engine.max_num_batched_tokens = budget;
                s
            })
    }

    /// `model` as the launch scripts serve it on `system`: the KV-cache type they set
    /// (`kv_cache`), set on it in place; unchanged where no script sets one.
    pub fn launch_model(&self, system: &crate::spec::System, model: &mut crate::spec::ModelSpec) {
        if let Some(kv) = self
            .launches(system, model)
            .filter_map(|l| l.kv_cache)
            .last()
        {
            model.quantization.kv_cache = kv;
        }
    }

    /// The client alone, before any launch script's setting applies (no engine named).
    pub fn model(&self) -> ClientModel {
        ClientModel {
            cap: (self.connection_cap > 0).then_some(self.connection_cap),
            start: self.start,
            num_prompts: (self.num_prompts > 0).then_some(self.num_prompts),
            prompts_per_concurrency: (self.prompts_per_concurrency > 0)
                .then_some(self.prompts_per_concurrency),
            lengths: self.lengths,
            range_ratio: self.range_ratio,
            sets_max_num_seqs: self.sets_max_num_seqs,
            per_chunk: self.per_chunk_cpu.0,
            recv_intervals: RecvIntervals::NONE,
            budget_per_input: None,
            batch_waits: BatchWaits::NONE,
        }
    }
}
