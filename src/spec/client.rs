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
    pub sources: BTreeMap<String, String>,
}

fn one() -> f64 {
    1.0
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
    };

    /// Requests in a run at concurrency `c` (None: unbounded, each client looping).
    pub fn prompts(&self, c: u32) -> Option<u64> {
        match (self.prompts_per_concurrency, self.num_prompts) {
            (Some(k), _) => Some(k as u64 * c as u64),
            (None, Some(n)) => Some(n as u64),
            (None, None) => None,
        }
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
        Ok(())
    }

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
        }
    }
}
