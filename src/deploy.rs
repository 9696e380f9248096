//! Disaggregated serving: a prefill pool and a decode pool on separate workers, with each
//! request's KV cache moved from one to the other.
//!
//! Why its own model: an aggregated engine ([`crate::serve`]) mixes prompts into the decode
//! steps of one pool, so prefill lengthens every step and decode batches delay every
//! prompt. Split, the two phases stop interfering, but a request now crosses three
//! resources in series (a prefill worker, the link between the pools, a decode worker) and
//! the slowest of them sets the throughput. The pools are described separately (worker
//! count and layout each, on one system), priced with the same kernel and collective
//! constants as the aggregated model, and joined by a closed loop:
//!
//! - **Prefill pool.** `P` workers, each a prefill-only engine whose pass carries up to `m`
//!   prompts (`batch` prompts per attention-DP replica, or as many as the engine's token
//!   budget holds): its capacity is `P · m / T(m)` requests/s, `T` the prefill pass with the
//!   engine's CPU beside it. A prompt's own prefill is the pass that carries it, at the
//!   prompts arriving during one pass (one at light load, `m` at saturation). The pass deals
//!   its prompts whole to the worker's attention-DP replicas, which step together: a pass
//!   of fewer prompts than replicas takes as long as one replica's prompt, not a share of
//!   it spread over all of them ([`Pass::dealt_whole`]).
//! - **Queueing in the prefill pool.** The same two waves as the aggregated TTFT: a client
//!   that starts with a burst sends every prompt at once, and that first wave queues through
//!   the pool's passes (`C / P` prompts per worker, `m` per pass, each prompt waiting for
//!   the passes before its own); later requests arrive as earlier ones finish, in steady
//!   state, and wait `ρ T / (2 (1 − ρ))` behind the other prompts (M/D/1, ρ the prefill
//!   utilisation). The client's mean weights the first wave by its share of the prompts.
//! - **KV transfer.** The cache one request leaves, `prompt × KV bytes per token`, moved
//!   GPU to GPU over the link between the pools ([`KvLink`]: the nodes' RDMA NICs, one per
//!   GPU): each GPU sends or receives its own share over its own NIC, so the time is the
//!   per-transfer latency plus the larger per-GPU share (the prefill layout's or the decode
//!   layout's, as each stores the cache: an MLA cache is whole on every TP rank, a GQA cache
//!   split over them) at one NIC's goodput. Its capacity is the NICs' rate over the bytes
//!   per request, on the side that moves more.
//! - **Decode pool.** `D` workers, each a decode-only engine holding at most `S` sequences
//!   (`batch` per attention-DP replica where given, else the engine's `max_num_seqs`, and
//!   never more than its KV cache holds at `input + output / 2` tokens each). TPOT is its step
//!   at its batch `b`: the requests of its share of the load that are decoding,
//!   `b = (λ / D) · output · TPOT(b)` by Little's law. Its capacity is `D · S / (output ·
//!   TPOT(S))` requests/s.
//! - **The closed loop.** C clients each send a request when their last one finishes:
//!   `C = λ (TTFT + (output − 1) TPOT)`, with TTFT = prefill + queue + KV transfer + the first
//!   decode step. The request rate λ is the root of that (every term grows with λ), found by
//!   bisection below the smallest capacity. When even the smallest capacity leaves clients
//!   over, they wait in the queue of the binding pool (a prompt waiting for a prefill pass
//!   or a decode slot), and that wait is part of TTFT's queue term.
//! - **Throughput** is `λ · output` tokens/s, never above any pool's capacity × output;
//!   `limiting_pool` names the smallest capacity, and `saturated` says whether the load
//!   reaches it.
//!
//! A worker must fit in one box of its system: a layout that needs more GPUs than the system
//! has is refused, naming the pool. A worker larger than a node runs on a multi-node system
//! (`2x8-h200-ib`), whose collectives cross the nodes' NICs.

use crate::cost::{Evaluator, Parallel, Pass};
use crate::error::{Error, Result};
use crate::predict::Scenario;
use crate::serve::{fits, Start, Workload};
use crate::units::{BytesPerSec, Fraction, Seconds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;

/// The built-in KV link, embedded.
pub const KV_LINK_TOML: &str = include_str!("../configs/kv_links/cx7-8x400g.toml");
const KV_LINK_LABEL: &str = "configs/kv_links/cx7-8x400g.toml";
/// The built-in KV link's name.
pub const DEFAULT_KV_LINK: &str = "cx7-8x400g";

/// One pool: its worker count and each worker's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pool {
    /// Replicas of this role.
    pub workers: u32,
    /// Each worker's layout (within one box of the system).
    pub parallel: Parallel,
    /// Per attention-DP replica: prompts per prefill pass, or sequences a decode worker
    /// runs at once (None: the engine's own limits).
    pub batch: Option<u32>,
}

impl Pool {
    /// GPUs the pool occupies.
    pub fn gpus(&self) -> u64 {
        self.workers as u64 * self.parallel.gpus() as u64
    }

    /// `2 x tp8ep8` (with `, batch 64` where given).
    pub fn label(&self) -> String {
        match self.batch {
            Some(b) => format!("{} x {} (batch {b})", self.workers, self.parallel),
            None => format!("{} x {}", self.workers, self.parallel),
        }
    }
}

impl FromStr for Pool {
    type Err = String;
    /// `workers=1,tp=8,ep=8` or `workers=2,dp=8,ep=8,batch=64`: keys in any order, missing
    /// degrees 1, `workers` 1 when absent.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        const EXPECTED: &str =
            "expected key=value pairs such as workers=1,tp=8,ep=8 (keys: workers, tp, ep, pp, dp, batch)";
        let mut p = Parallel::tp(1);
        let (mut workers, mut batch) = (1u32, None);
        let mut seen: Vec<String> = Vec::new();
        if s.trim().is_empty() {
            return Err(format!("empty pool; {EXPECTED}"));
        }
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("bad pool \"{s}\": \"{part}\" has no '='; {EXPECTED}"))?;
            let k = k.trim().to_ascii_lowercase();
            if seen.contains(&k) {
                return Err(format!("bad pool \"{s}\": {k} given twice; {EXPECTED}"));
            }
            let n: u32 = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!(
                    "bad pool \"{s}\": {k} = \"{}\": expected a whole number of at least 1",
                    v.trim()
                )
            })?;
            match k.as_str() {
                "workers" => workers = n,
                "tp" => p.tp = n,
                "ep" => p.ep = n,
                "pp" => p.pp = n,
                "dp" => p.dp = n,
                "batch" => batch = Some(n),
                other => return Err(format!("bad pool \"{s}\": unknown key {other}; {EXPECTED}")),
            }
            seen.push(k);
        }
        Ok(Pool {
            workers,
            parallel: p,
            batch,
        })
    }
}

/// The link KV caches cross between the pools: the nodes' NICs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvLink {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Compute-fabric NICs per node.
    pub nics_per_node: u32,
    /// GPUs per node sharing them.
    pub gpus_per_node: u32,
    /// Line rate of one NIC.
    pub nic_rate: BytesPerSec,
    /// Goodput of a large transfer over the line rate.
    pub efficiency: Fraction,
    /// Fixed cost of one request's transfer.
    pub latency: Seconds,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

impl KvLink {
    /// The built-in link (8 x 400 Gb/s ConnectX-7 per node).
    pub fn builtin() -> Result<KvLink> {
        Self::parse(KV_LINK_TOML, KV_LINK_LABEL)
    }

    /// The built-in name, or a path to a KV-link TOML.
    pub fn load(name: &str) -> Result<KvLink> {
        if name == DEFAULT_KV_LINK {
            return Self::builtin();
        }
        let path = std::path::Path::new(name);
        if !path.is_file() {
            return Err(Error::Scenario(format!(
                "KV link \"{name}\": neither the built-in {DEFAULT_KV_LINK} nor a file (a TOML in the form of {KV_LINK_LABEL})"
            )));
        }
        let text = crate::files::read_text(path)?;
        Self::parse(&text, name)
    }

    fn parse(text: &str, label: &str) -> Result<KvLink> {
        let l: KvLink = crate::spec::registry::parse_toml(text, label)?;
        let bad = |field: &str, expected: &str| Error::Invalid {
            file: label.to_string(),
            line: crate::error::line_of_field(text, field),
            field: field.to_string(),
            expected: expected.to_string(),
        };
        if l.nics_per_node == 0 {
            return Err(bad("nics_per_node", "at least 1 NIC"));
        }
        if l.gpus_per_node == 0 {
            return Err(bad("gpus_per_node", "at least 1 GPU"));
        }
        if !l.nic_rate.is_plausible() {
            return Err(bad(
                "nic_rate",
                &format!(
                    "a rate {} such as \"400 Gb/s\"",
                    BytesPerSec::PLAUSIBLE_TEXT
                ),
            ));
        }
        if !(0.0..=10.0).contains(&l.latency.0) {
            return Err(bad(
                "latency",
                "a time from 0 to 10 s per transfer such as \"1 ms\"",
            ));
        }
        Ok(l)
    }

    /// Goodput one GPU's share of the NICs gives it, bytes/s.
    pub fn rate_per_gpu(&self) -> f64 {
        self.nic_rate.0 * self.efficiency.0 * self.nics_per_node as f64 / self.gpus_per_node as f64
    }
}

/// A disaggregated deployment: the two pools and the link between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub prefill: Pool,
    pub decode: Pool,
    pub link: KvLink,
}

/// A deployment TOML: `[prefill]` and `[decode]` tables (workers, tp, ep, pp, dp, batch)
/// and an optional `kv_link` (the built-in name or a path).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeploymentFile {
    prefill: PoolFile,
    decode: PoolFile,
    #[serde(default)]
    kv_link: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    #[serde(default = "one")]
    workers: u32,
    #[serde(default = "one")]
    tp: u32,
    #[serde(default = "one")]
    ep: u32,
    #[serde(default = "one")]
    pp: u32,
    #[serde(default = "one")]
    dp: u32,
    #[serde(default)]
    batch: Option<u32>,
}

fn one() -> u32 {
    1
}

impl Deployment {
    /// Read a deployment TOML (`label` names it in errors); `link` in place of its
    /// `kv_link` where given.
    pub fn parse(text: &str, label: &str, link: Option<&str>) -> Result<Deployment> {
        Self::parse_in(text, label, link, None)
    }

    /// [`Deployment::parse`] of the file at `path`: a relative `kv_link` path it names is
    /// read from the file's own folder, as a system file's `gpu` is (`link`, from the
    /// command line, stays relative to the working directory).
    pub fn parse_at(text: &str, path: &std::path::Path, link: Option<&str>) -> Result<Deployment> {
        Self::parse_in(text, &path.display().to_string(), link, path.parent())
    }

    fn parse_in(
        text: &str,
        label: &str,
        link: Option<&str>,
        folder: Option<&std::path::Path>,
    ) -> Result<Deployment> {
        let f: DeploymentFile = crate::spec::registry::parse_toml(text, label)?;
        let pool = |name: &str, p: &PoolFile| -> Result<Pool> {
            for (field, v) in [
                ("workers", p.workers),
                ("tp", p.tp),
                ("ep", p.ep),
                ("pp", p.pp),
                ("dp", p.dp),
                ("batch", p.batch.unwrap_or(1)),
            ] {
                if v == 0 {
                    let field = format!("{name}.{field}");
                    return Err(Error::Invalid {
                        file: label.to_string(),
                        line: crate::error::line_of_field(text, &field),
                        field,
                        expected: "a whole number of at least 1".into(),
                    });
                }
            }
            Ok(Pool {
                workers: p.workers,
                parallel: Parallel {
                    tp: p.tp,
                    ep: p.ep,
                    pp: p.pp,
                    dp: p.dp,
                    redundant_experts: 0,
                },
                batch: p.batch,
            })
        };
        let in_file = f.kv_link.clone().map(|n| match folder {
            Some(dir) if n != DEFAULT_KV_LINK && std::path::Path::new(&n).is_relative() => {
                let beside = dir.join(&n);
                if beside.is_file() {
                    beside.display().to_string()
                } else {
                    n
                }
            }
            _ => n,
        });
        let name = link
            .map(String::from)
            .or(in_file)
            .unwrap_or_else(|| DEFAULT_KV_LINK.to_string());
        Ok(Deployment {
            prefill: pool("prefill", &f.prefill)?,
            decode: pool("decode", &f.decode)?,
            link: KvLink::load(&name)?,
        })
    }

    pub fn gpus(&self) -> u64 {
        self.prefill.gpus() + self.decode.gpus()
    }
}

/// Refuse a pool whose worker needs more GPUs than one box of `system` has.
pub fn check_box(role: &str, pool: &Pool, system: &crate::spec::System) -> Result<()> {
    let need = pool.parallel.gpus();
    let have = system.spec.gpu_count;
    if need > have {
        return Err(Error::Scenario(format!(
            "the {role} pool's worker ({}) needs {need} GPUs, but one box of {} has {have}: a worker must fit in one box (a multi-node system such as 2x8-h200-ib holds a larger one)",
            pool.parallel, system.spec.name
        )));
    }
    Ok(())
}

/// One concurrency of a disaggregated deployment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DisaggPoint {
    /// The client's concurrent requests.
    pub concurrency: u32,
    /// Of them, the requests the client holds in flight (its connection cap, the prompts
    /// it sends); the rest wait for a connection, counted in `queue_ms`.
    pub in_flight: u32,
    /// Mean TTFT as the client measures it (first wave weighted in), ms: the sum of
    /// `prefill_ms`, `queue_ms`, `kv_transfer_ms` and `first_step_ms`.
    pub ttft_ms: f64,
    /// The pass that prefills the request, ms.
    pub prefill_ms: f64,
    /// Waiting: for a prefill pass (first wave and steady state), past the smallest
    /// capacity in the binding pool's queue, and past the client's cap for a connection, ms.
    pub queue_ms: f64,
    /// Moving the request's KV cache to its decode worker, ms.
    pub kv_transfer_ms: f64,
    /// The decode step that emits the first token, ms.
    pub first_step_ms: f64,
    /// TTFT in the loop's steady state (no burst), ms.
    pub ttft_steady_ms: f64,
    /// The decode pool's step at its batch, ms.
    pub tpot_ms: f64,
    /// Sequences in one decode worker's step (mean).
    pub decode_batch: f64,
    /// Sequences one decode worker holds at most (its batch cap and KV cache).
    pub decode_slots: u32,
    /// Requests per second through the deployment.
    pub request_rate_req_s: f64,
    /// Output tokens per second of the deployment, and per GPU of both pools.
    pub throughput_tok_s: f64,
    pub throughput_per_gpu_tok_s: f64,
    /// Requests per second each stage could carry at most.
    pub prefill_capacity_req_s: f64,
    pub decode_capacity_req_s: f64,
    pub kv_link_capacity_req_s: f64,
    /// `prefill`, `decode` or `kv_link`: the smallest capacity.
    pub limiting_pool: &'static str,
    /// The load reaches the limiting capacity (within 2 %).
    pub saturated: bool,
    /// Load over capacity of the prefill and decode pools.
    pub prefill_utilisation: f64,
    pub decode_utilisation: f64,
}

/// The record of a disaggregated sweep.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DisaggSweep {
    pub model: String,
    pub system: String,
    /// `workers x layout` of each pool.
    pub prefill: String,
    pub decode: String,
    pub kv_link: String,
    /// GPUs of both pools.
    pub gpus: u64,
    pub input_len: u32,
    pub output_len: u32,
    /// KV bytes per token a decode replica stores (all layers, over its GPUs).
    pub kv_bytes_per_token: f64,
    /// One request's KV transfer on an idle link, ms.
    pub kv_transfer_alone_ms: f64,
    pub points: Vec<DisaggPoint>,
}

/// Upper bound on the prefill utilisation the M/D/1 wait is evaluated at (as the aggregated
/// loop's guard: the wait grows without bound toward 1).
const MAX_UTILISATION: f64 = 0.999;
/// Bisection steps of the closed loop's request rate, and of the decode batch.
const BISECTION_STEPS: u32 = 80;

/// The pieces of the model that do not depend on the load.
struct Pools<'s, 'a> {
    pre: Evaluator<'a>,
    dec: Evaluator<'a>,
    pre_s: &'s Scenario<'a>,
    dec_s: &'s Scenario<'a>,
    d: &'s Deployment,
    input: f64,
    output: f64,
    ctx: f64,
    /// Prompts per prefill pass (all DP replicas of a worker).
    per_pass: f64,
    /// Sequences one decode worker holds at most.
    slots: f64,
    /// Per-GPU KV bytes per token on each side.
    pre_bytes: f64,
    dec_bytes: f64,
    client: crate::serve::ClientModel,
}

impl Pools<'_, '_> {
    /// A prefill pass of `m` prompts on one worker, with the engine's CPU beside it, s.
    fn pass(&self, m: f64) -> f64 {
        let s = self.pre_s;
        let m = m.max(1.0);
        let dp = self.d.prefill.parallel.dp;
        let pass = Pass::prefill(m, self.input, 0.0).dealt_whole(dp);
        let gpu = self.pre.evaluate(&pass).total;
        let cpu = &s.system.engine.cpu;
        cpu.engine_step(gpu, s.params.step_overhead, m, s.overlaps())
    }

    /// A decode worker's step at `b` sequences, s: GPU and engine CPU as the engine
    /// schedules them, and the API server and client streaming beside.
    fn step(&self, b: f64) -> f64 {
        let s = self.dec_s;
        let b = b.max(1.0);
        let gpu = self.dec.evaluate(&Pass::decode(b, self.ctx)).total;
        let cpu = &s.system.engine.cpu;
        let engine = cpu.engine_step(gpu, s.params.step_overhead, b, s.overlaps());
        let api = b * s.params.api_per_token.unwrap_or(cpu.api_per_token.0);
        let client = b * self.client.per_chunk;
        engine.max(api).max(client)
    }

    /// One request's KV transfer when `n` prompts per prefill GPU leave together, s.
    fn transfer(&self, n: f64) -> f64 {
        let rate = self.d.link.rate_per_gpu();
        let bytes = (n.max(1.0) * self.pre_bytes).max(self.dec_bytes) * self.input;
        self.d.link.latency.0 + bytes / rate
    }

    fn prefill_capacity(&self) -> f64 {
        self.d.prefill.workers as f64 * self.per_pass / self.pass(self.per_pass)
    }

    fn decode_capacity(&self) -> f64 {
        self.d.decode.workers as f64 * self.slots / (self.output * self.step(self.slots))
    }

    fn link_capacity(&self) -> f64 {
        let rate = self.d.link.rate_per_gpu();
        let side = |pool: &Pool, bytes: f64| {
            pool.workers as f64 * pool.parallel.dp as f64 * rate / (bytes * self.input).max(1.0)
        };
        side(&self.d.prefill, self.pre_bytes).min(side(&self.d.decode, self.dec_bytes))
    }

    /// Decode batch per worker at request rate `lambda`: the root of
    /// `b = (λ / D) · output · step(b)` below the slots (the slots when none is).
    fn decode_batch(&self, lambda: f64) -> f64 {
        let per = lambda / self.d.decode.workers as f64 * self.output;
        let g = |b: f64| b - per * self.step(b);
        if g(self.slots) <= 0.0 {
            return self.slots;
        }
        let (mut lo, mut hi) = (0.0, self.slots);
        for _ in 0..BISECTION_STEPS {
            let mid = 0.5 * (lo + hi);
            if g(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// The steady state at request rate `lambda`: (own prefill pass, its wait, transfer,
    /// decode batch, step).
    fn at(&self, lambda: f64, mu_p: f64, c: f64) -> (f64, f64, f64, f64, f64) {
        let workers = self.d.prefill.workers as f64;
        let per_worker = lambda / workers;
        let full = self.pass(self.per_pass);
        // Prompts a pass carries: those that arrive during one, between one and a full pass,
        // and never more than the clients a worker serves.
        let m = (per_worker * full)
            .min(c / workers)
            .clamp(1.0, self.per_pass);
        let own = self.pass(m);
        // A prompt queues behind the other C - 1 clients' prompts only (as the aggregated
        // loop counts them): it arrives at a load of (C - 1) / C of the rate, and the one
        // client of C = 1 never waits.
        let others = (c - 1.0).max(0.0) / c.max(1.0);
        let rho = (lambda * others / mu_p).min(MAX_UTILISATION);
        let wait = rho * own / (2.0 * (1.0 - rho));
        let dp = self.d.prefill.parallel.dp as f64;
        let tx = self.transfer(m / dp);
        let b = self.decode_batch(lambda);
        (own, wait, tx, b, self.step(b))
    }

    /// The first wave of a burst: every worker's `C / P` prompts through its passes of
    /// `per_pass`; (mean finish, the pass that carries a prompt, its transfer), s.
    fn first_wave(&self, c: f64) -> (f64, f64, f64) {
        let n = (c / self.d.prefill.workers as f64).ceil().max(1.0);
        let m = self.per_pass.min(n);
        let t = self.pass(m);
        let full = (n / m).floor();
        let rem = n - full * m;
        let mean = (m * t * full * (full + 1.0) / 2.0
            + if rem > 0.0 {
                rem * (full * t + self.pass(rem))
            } else {
                0.0
            })
            / n;
        let dp = self.d.prefill.parallel.dp as f64;
        (mean, t, self.transfer(m / dp))
    }

    fn point(&self, c: u32) -> DisaggPoint {
        // The loop runs the requests the client holds in flight (its connection cap, the
        // prompts it sends); the rest of its C wait for a connection, in their TTFT.
        let clients = self.client.senders(c.max(1)) as f64;
        let in_flight = self.client.in_flight(c.max(1));
        let cf = in_flight as f64;
        let mu_p = self.prefill_capacity();
        let mu_d = self.decode_capacity();
        let mu_l = self.link_capacity();
        let (limiting, mu) = [("prefill", mu_p), ("decode", mu_d), ("kv_link", mu_l)]
            .into_iter()
            .fold(
                ("prefill", f64::INFINITY),
                |a, b| if b.1 < a.1 { b } else { a },
            );
        // Requests in the system at rate λ (Little): each spends its TTFT and `output − 1`
        // further steps.
        let population = |lambda: f64| {
            let (own, wait, tx, _, step) = self.at(lambda, mu_p, cf);
            lambda * (own + wait + tx + self.output * step)
        };
        let top = mu * (1.0 - 1e-9);
        let (lambda, queued) = if population(top) <= cf {
            (top, (cf - population(top)) / top)
        } else {
            let (mut lo, mut hi) = (0.0, top);
            for _ in 0..BISECTION_STEPS {
                let mid = 0.5 * (lo + hi);
                if population(mid) < cf {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (lo, 0.0)
        };
        let (own, wait, tx, b_rate, step_rate) = self.at(lambda, mu_p, cf);
        // The rate does not always fix the decode batch. Where the step grows in proportion
        // to the batch (a per-token bound: the API server, the client), every batch up to
        // the slots carries the decode pool's capacity; where the step jumps (a wave more of
        // CTAs, a kernel's tile), the batch that carries a rate jumps over a range of
        // populations, which the pool then runs as a mixture of the two sides. Either way
        // the loop's requests that are not in prefill, its queue or transfer are decoding,
        // in free slots first, and the decode pool's TPOT is what Little's law gives for its
        // batch at this rate. Only requests past the slots wait for one, and where the
        // prefill pool or the link binds, the requests it cannot take wait before it.
        let workers = self.d.decode.workers as f64;
        let outside = lambda * (own + wait + tx);
        let (b, step, extra) = if queued > 0.0 && limiting != "decode" {
            (b_rate, step_rate, queued)
        } else {
            // (max then min: never a panic, should a step come back NaN; the sweep refuses
            // a point that is not finite.)
            let b = ((cf - outside) / workers).max(b_rate).min(self.slots);
            let step = if b > b_rate {
                (workers * b / (lambda * self.output)).max(step_rate)
            } else {
                step_rate
            };
            (b, step, ((cf - outside - workers * b) / lambda).max(0.0))
        };
        let steady = own + wait + extra + tx + step;
        let share = if self.client.start == Start::Burst {
            self.client.first_wave_share(c)
        } else {
            0.0
        };
        let (finish, first_pass, first_tx) = self.first_wave(cf);
        let prefill = share * first_pass + (1.0 - share) * own;
        let queue =
            share * ((finish - first_pass).max(0.0) + extra) + (1.0 - share) * (wait + extra);
        let transfer = share * first_tx + (1.0 - share) * tx;
        // Requests past the client's cap wait for a connection: (C − in flight) / λ each
        // (Little), as the aggregated loop counts them.
        let held = if lambda > 0.0 {
            (clients - cf).max(0.0) / lambda
        } else {
            0.0
        };
        let queue = queue + held;
        let steady = steady + held;
        let ttft = prefill + queue + transfer + step;
        let gpus = self.d.gpus().max(1) as f64;
        let throughput = lambda * self.output;
        DisaggPoint {
            concurrency: c,
            in_flight,
            ttft_ms: ttft * 1e3,
            prefill_ms: prefill * 1e3,
            queue_ms: queue * 1e3,
            kv_transfer_ms: transfer * 1e3,
            first_step_ms: step * 1e3,
            ttft_steady_ms: steady * 1e3,
            tpot_ms: step * 1e3,
            decode_batch: b,
            decode_slots: self.slots as u32,
            request_rate_req_s: lambda,
            throughput_tok_s: throughput,
            throughput_per_gpu_tok_s: throughput / gpus,
            prefill_capacity_req_s: mu_p,
            decode_capacity_req_s: mu_d,
            kv_link_capacity_req_s: mu_l,
            limiting_pool: limiting,
            saturated: lambda >= 0.98 * mu,
            prefill_utilisation: lambda / mu_p,
            decode_utilisation: lambda / mu_d,
        }
    }
}

/// Evaluate a deployment at each concurrency: `prefill` and `decode` are the two pools'
/// scenarios (the same model and system, each pool's layout), `d` the deployment.
pub fn sweep(
    prefill: &Scenario,
    decode: &Scenario,
    d: &Deployment,
    concurrency: &[u32],
    w: Workload,
) -> Result<DisaggSweep> {
    check_box("prefill", &d.prefill, prefill.system)?;
    check_box("decode", &d.decode, decode.system)?;
    if prefill.parallel != d.prefill.parallel || decode.parallel != d.decode.parallel {
        return Err(Error::Scenario(
            "the pools' scenarios do not carry the deployment's layouts".into(),
        ));
    }
    let input = w.client.mean_length(w.input_len.max(1) as f64);
    let output = w.client.mean_length(w.output_len.max(1) as f64);
    let pre_eng = &prefill.system.engine;
    let dec_eng = &decode.system.engine;
    // A prefill worker holds its pass's prompts until they leave; a decode worker its
    // running sequences at their mean context.
    let dp_p = d.prefill.parallel.dp as f64;
    let per_replica = match d.prefill.batch {
        Some(b) => b as f64,
        None => (pre_eng.max_num_batched_tokens as f64 / input)
            .floor()
            .max(1.0),
    };
    let per_pass = per_replica * dp_p;
    let pre_mem = fits(prefill, per_pass, input)
        .map_err(|e| Error::Scenario(format!("prefill pool: {e}")))?;
    let dec_mem = fits(decode, 1.0, input + output)
        .map_err(|e| Error::Scenario(format!("decode pool: {e}")))?;
    let held = dec_eng.kv.held_tokens(input, output);
    let kv_max = crate::predict::sequences(dec_mem.max_kv_tokens, held).max(1.0);
    let cap = match d.decode.batch {
        Some(b) => b as f64 * d.decode.parallel.dp as f64,
        None if w.client.sets_max_num_seqs => f64::INFINITY,
        None => dec_eng.max_num_seqs as f64,
    };
    let slots = kv_max.min(cap).max(1.0);
    let pools = Pools {
        pre: prefill.evaluator()?,
        dec: decode.evaluator()?,
        pre_s: prefill,
        dec_s: decode,
        d,
        input,
        output,
        ctx: input + output / 2.0,
        per_pass,
        slots,
        pre_bytes: pre_mem.kv_bytes_per_token_per_gpu,
        dec_bytes: dec_mem.kv_bytes_per_token_per_gpu,
        client: w.client,
    };
    let points: Vec<DisaggPoint> = concurrency.iter().map(|&c| pools.point(c)).collect();
    if let Some(p) = points
        .iter()
        .find(|p| !p.ttft_ms.is_finite() || !p.tpot_ms.is_finite())
    {
        return Err(Error::Scenario(format!(
            "the deployment gives no finite TTFT or TPOT at concurrency {}",
            p.concurrency
        )));
    }
    // A replica's whole cache per token: every stage's layers (the busiest stage's share
    // times the stages overcounted an uneven split), on each of its TP ranks.
    let replica_bytes = crate::cost::memory::Residency::new(decode.model, &d.decode.parallel)
        .kv_bytes_per_token_all_stages()
        * d.decode.parallel.tp as f64;
    Ok(DisaggSweep {
        model: decode.model.name.clone(),
        system: decode.system.spec.name.clone(),
        prefill: d.prefill.label(),
        decode: d.decode.label(),
        kv_link: d.link.name.clone(),
        gpus: d.gpus(),
        input_len: w.input_len,
        output_len: w.output_len,
        kv_bytes_per_token: replica_bytes,
        kv_transfer_alone_ms: pools.transfer(1.0) * 1e3,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_read_as_written() {
        let p: Pool = "workers=2,dp=8,ep=8,batch=64".parse().unwrap();
        assert_eq!(
            (p.workers, p.parallel.dp, p.parallel.ep, p.parallel.tp),
            (2, 8, 8, 1)
        );
        assert_eq!(p.batch, Some(64));
        let p: Pool = "tp=8".parse().unwrap();
        assert_eq!((p.workers, p.parallel.tp), (1, 8));
        for bad in ["", "tp8", "tp=0", "tp=8,tp=4", "xx=2"] {
            assert!(bad.parse::<Pool>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_builtin_link_loads_with_its_rate() {
        let l = KvLink::builtin().unwrap();
        // 400 Gb/s = 50 GB/s per NIC, one per GPU, at 0.8.
        assert!(
            (l.rate_per_gpu() - 40e9).abs() < 1.0,
            "{}",
            l.rate_per_gpu()
        );
    }
}
