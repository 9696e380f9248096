//! The mean TTFT a bounded benchmark run reports: a small deterministic simulation of the
//! harness against the engine's step.
//!
//! The harness (InferenceMAX's client, `vllm bench serve` in a sweep) sends `prompts`
//! requests at an infinite rate through a semaphore of `concurrency`: the first wave of C
//! arrives at once, and each later request is sent when an earlier one finishes. The engine
//! runs at most `slots` of them; the rest wait in its queue. Where prefill mixes with decode
//! (vLLM, TensorRT-LLM), each step advances every decoding sequence by one token and fills
//! the rest of its token budget with the queued prompts, first come, first served. Where it
//! does not (SGLang without `--enable-mixed-chunk`), a step with prompts waiting prefills
//! only prompts, up to the whole budget, and the decodes wait: prefill first. With chunked
//! prefill a prompt larger than the room is split over steps; without, a step takes whole
//! prompts (one at least). A prompt's first token comes at the end of
//! the step that finishes its prefill (with overlap scheduling, later by that same step's
//! length: a stand-in, see [`run_means`]); it then needs `output − 1` decode steps. The
//! reported TTFT is the mean over every request.
//!
//! A scheduler may poll for new requests less often than every step (SGLang's
//! `--scheduler-recv-interval N`, `scheduler_recv_skipper.py`): each decode step adds 1 to a
//! counter, a step that carried prompts fills it, and the scheduler receives what was sent
//! only when the counter has reached `N` (then it starts again from 0). A request sent
//! during a stretch of decodes waits for the next poll, some `N / 2` steps on average.
//!
//! An engine with data-parallel attention may hold prompts back to balance its ranks
//! (TensorRT-LLM's `attention_dp_config.enable_balance`, `py_executor.py`
//! `_balance_adp_requests`): each request goes to the rank with the fewest requests, and
//! every iteration the ranks compare what they would schedule. Where every rank has a prompt
//! to prefill they prefill at once (after `batching_wait` more iterations when every rank
//! also decodes); otherwise an iteration counter advances, and the prompts wait until it
//! reaches `timeout` (then it starts again from 0), or run at once when some rank has
//! nothing to decode. The counter runs through decode-only iterations too, so a prompt sent
//! into a busy engine waits some `timeout / 2` iterations on average.
//!
//! An engine may also hold prompts back to batch them (TensorRT-LLM's
//! `batch_wait_timeout_iters` with `batch_wait_max_tokens_ratio`, `py_executor.py`
//! `_waiting_requests`, without data-parallel attention): in an iteration that would prefill
//! while requests decode, the prompts run only when the tokens it would schedule (the
//! prompts' whole lengths and one per decoding request) reach the threshold, or when its
//! counter has reached the timeout; otherwise the iteration only decodes and the counter
//! advances. It starts again at 0 when the prompts run. A prompt sent into a busy engine
//! with no other prompt about waits the whole timeout.
//!
//! No closed form holds once lengths are drawn (the waves drift apart and mix with the
//! decodes), so the process is simulated, skipping the decode-only stretches between events:
//! a few events per request. [`expected_ttft`] averages the run over a few draws of its
//! lengths from a fixed generator (so it is deterministic), enough for some 2,000 requests
//! (32,000 where polls or context balancing make runs vary more, at most 32 draws);
//! `tests/harness_ttft.rs` checks it against a seeded Monte-Carlo of the harness, one engine
//! step at a time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What the harness and the engine's scheduler do in one bounded run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HarnessRun {
    /// The client's concurrency C (its semaphore).
    pub concurrency: u32,
    /// Requests the engine runs at once (at most C: max_num_seqs, KV).
    pub slots: u32,
    /// Requests in the run (e.g. 10 × C).
    pub prompts: u32,
    /// The largest input and output lengths, tokens.
    pub input: f64,
    pub output: f64,
    /// Lengths are drawn uniformly from `[range_ratio · L, L]` (1: every request is `L`).
    pub range_ratio: f64,
    /// Tokens one step may carry (decode tokens included when mixed).
    pub budget: f64,
    /// A prompt may be split over steps.
    pub chunked: bool,
    /// A step carrying prompts also advances the decodes (and their tokens take room in
    /// the budget); otherwise the decodes wait while prompts are prefilled.
    pub mixed: bool,
    /// The first token leaves one step after the step that computed it.
    pub overlap: bool,
    /// Decode steps between the scheduler's polls for new requests (1: every step).
    pub recv_interval: u32,
    /// Prompts held back to balance data-parallel attention ranks (None: never held).
    pub balance: Option<ContextBalance>,
    /// Prompts held back for a batch while others decode (None: never held).
    pub batch_wait: Option<BatchHold>,
}

/// Batch waiting (TensorRT-LLM's `batch_wait_timeout_iters` and
/// `batch_wait_max_tokens_ratio`): see the module docs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchHold {
    /// Decode-only iterations prompts may be held (`batch_wait_timeout_iters`).
    pub timeout: u32,
    /// Tokens an iteration must schedule to release them at once (the prompts' whole
    /// lengths and one per decoding request): `batch_wait_max_tokens_ratio` of the budget.
    pub tokens: f64,
}

/// The batch-waiting counter of one run.
struct Waiter {
    rule: BatchHold,
    count: u32,
}

impl Waiter {
    /// The decision for an iteration that would schedule `tokens` while requests decode.
    fn gate(&mut self, tokens: f64) -> Gate {
        if self.count >= self.rule.timeout || tokens >= self.rule.tokens {
            self.count = 0;
            return Gate::Release;
        }
        Gate::Hold {
            iterations: (self.rule.timeout - self.count) as u64,
            counting: true,
        }
    }

    /// `m` iterations held.
    fn held(&mut self, m: u64) {
        self.count = (self.count as u64 + m).min(self.rule.timeout as u64) as u32;
    }
}

/// Context balancing over data-parallel attention ranks (TensorRT-LLM's
/// `attention_dp_config` with `enable_balance`): see the module docs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextBalance {
    /// Attention ranks, each with its own requests.
    pub ranks: u32,
    /// Iterations a prompt waits for every rank to have one (`timeout_iters`).
    pub timeout: u32,
    /// Iterations more, once every rank has one and every rank decodes
    /// (`batching_wait_iters`).
    pub batching_wait: u32,
}

/// The balancing state of one run: which rank each request is on, what each rank holds,
/// and the two iteration counters.
struct Balancer {
    rule: ContextBalance,
    rank_of: Vec<usize>,
    active: Vec<u32>,
    decoding: Vec<u32>,
    waited: u32,
    batched: u32,
    /// Scratch for [`Balancer::gate`]: which ranks have a prompt ready.
    ready_on: Vec<bool>,
}

/// What the balancer lets the next iteration do with the prompts ready to prefill.
enum Gate {
    /// Prefill them now.
    Release,
    /// Hold them for `iterations` decode-only iterations (at least 1), unless a request
    /// finishes first; `counting`: each one advances the timeout counter.
    Hold { iterations: u64, counting: bool },
}

impl Balancer {
    fn new(rule: ContextBalance, n: usize) -> Balancer {
        let ranks = rule.ranks.max(1) as usize;
        Balancer {
            rule,
            rank_of: vec![0; n],
            active: vec![0; ranks],
            decoding: vec![0; ranks],
            waited: 0,
            batched: 0,
            ready_on: vec![false; ranks],
        }
    }

    /// Request `i` is sent: it goes to the rank with the fewest requests (the lowest of
    /// equals).
    fn send(&mut self, i: usize) {
        let r = (0..self.active.len())
            .min_by_key(|&r| (self.active[r], r))
            .unwrap_or(0);
        self.rank_of[i] = r;
        self.active[r] += 1;
    }

    fn starts_decoding(&mut self, i: usize) {
        self.decoding[self.rank_of[i]] += 1;
    }

    fn finishes(&mut self, i: usize) {
        let r = self.rank_of[i];
        self.decoding[r] = self.decoding[r].saturating_sub(1);
        self.active[r] = self.active[r].saturating_sub(1);
    }

    fn every_rank_decodes(&self) -> bool {
        self.decoding.iter().all(|&d| d > 0)
    }

    /// The decision for an iteration with `ready` (requests) waiting to prefill, the counters
    /// updated as the engine updates them in that iteration.
    fn gate(&mut self, ready: impl Iterator<Item = usize>) -> Gate {
        self.ready_on.fill(false);
        for i in ready {
            self.ready_on[self.rank_of[i]] = true;
        }
        let decodes = self.every_rank_decodes();
        if self.ready_on.iter().all(|&h| h) {
            self.waited = 0;
            if decodes && self.batched < self.rule.batching_wait {
                self.batched += 1;
                return Gate::Hold {
                    iterations: 1,
                    counting: false,
                };
            }
            self.batched = 0;
            return Gate::Release;
        }
        if !decodes || self.waited + 1 >= self.rule.timeout {
            self.waited = 0;
            return Gate::Release;
        }
        // Held until the counter reaches the timeout: the iteration that reaches it runs
        // the prompts.
        Gate::Hold {
            iterations: (self.rule.timeout - 1 - self.waited).max(1) as u64,
            counting: true,
        }
    }

    /// `m` iterations with nothing to prefill, or held by the timeout: the counter
    /// advances (and starts again at the timeout, or stays at 0 while some rank has nothing
    /// to decode).
    fn idle(&mut self, m: u64) {
        if self.every_rank_decodes() {
            let t = self.rule.timeout.max(1) as u64;
            self.waited = ((self.waited as u64 + m) % t) as u32;
        } else {
            self.waited = 0;
        }
    }
}

/// One request's input and output lengths, tokens.
pub type Lengths = (f64, f64);

/// The engine's step, seconds, with `decoding` sequences decoding and `prompt_tokens`
/// tokens of `prompts` prompts prefilled in it (beside the decodes when chunked; alone when
/// not).
pub trait StepTime {
    fn step(&self, decoding: f64, prompt_tokens: f64, prompts: f64) -> f64;
}

impl<F: Fn(f64, f64, f64) -> f64> StepTime for F {
    fn step(&self, decoding: f64, prompt_tokens: f64, prompts: f64) -> f64 {
        self(decoding, prompt_tokens, prompts)
    }
}

/// The lengths of a request: `u` in [0, 1) → a length in `[r · L, L]`, whole tokens, at
/// least 1 (the random dataset's `randint(r · L, L)`).
pub fn length_at(l: f64, r: f64, u: f64) -> f64 {
    let lo = (r * l).floor().max(1.0);
    let hi = l.max(lo);
    (lo + (u * (hi - lo + 1.0)).floor()).min(hi)
}

/// Runs the expectation averages at least: a run of few requests is averaged over several
/// draws of its lengths, a long one averages itself.
const EXPECTATION_REQUESTS: u64 = 2_000;
const MAX_DRAWS: u64 = 32;

/// One step of splitmix64: advances `state` and returns the next 64-bit draw. Every fixed
/// draw in rooftop (a harness's lengths, `calibrate --holdout`'s split) comes from it.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed generator (splitmix64): the draws are part of the model, the same every time.
struct Draws(u64);

impl Draws {
    /// A number uniform in [0, 1).
    fn next(&mut self) -> f64 {
        (splitmix64(&mut self.0) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every request's lengths in draw `k` of the run: each length drawn uniformly from its
/// whole-token range by a fixed generator (every request the same when lengths are fixed).
pub fn drawn_lengths(run: &HarnessRun, k: u64) -> Vec<Lengths> {
    let n = run.prompts.max(1) as usize;
    if run.range_ratio >= 1.0 {
        return vec![(run.input.max(1.0).round(), run.output.max(1.0).round()); n];
    }
    let mut g = Draws(k.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ 0x5eed);
    (0..n)
        .map(|_| {
            let i = length_at(run.input, run.range_ratio, g.next());
            (i, length_at(run.output, run.range_ratio, g.next()))
        })
        .collect()
}

/// What a bounded run reports, averaged over its requests, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunMeans {
    /// Mean time to the first token.
    pub ttft: f64,
    /// Mean of each request's inter-token time, `(E2E − TTFT) / (output − 1)`, over the
    /// requests with more than one output token (0 when none has).
    pub itl: f64,
}

/// The expected mean TTFT of the run, seconds: the mean over fixed draws of its lengths
/// (enough draws for some 2,000 requests in all, 32,000 under polls or context balancing, at
/// most 32; one when lengths are fixed).
pub fn expected_ttft(run: &HarnessRun, step: &impl StepTime) -> f64 {
    expected_means(run, step).ttft
}

/// The expected [`RunMeans`] of the run: each mean over the fixed draws of its lengths, as
/// [`expected_ttft`].
pub fn expected_means(run: &HarnessRun, step: &impl StepTime) -> RunMeans {
    // Context balancing and polls every N steps make one run's mean depend on where the
    // timeouts and polls fall among its arrivals (some 8 % from run to run at C = 128 over
    // 8 ranks, some 15 % polling every 30 steps): sixteen times the requests.
    let held = run.balance.is_some() || run.batch_wait.is_some() || run.recv_interval > 1;
    let requests = EXPECTATION_REQUESTS * if held { 16 } else { 1 };
    let draws = if run.range_ratio >= 1.0 {
        1
    } else {
        (requests / run.prompts.max(1) as u64).clamp(1, MAX_DRAWS)
    };
    let mut sum = RunMeans::default();
    for k in 0..draws {
        let m = run_means(run, &drawn_lengths(run, k), step);
        sum.ttft += m.ttft;
        sum.itl += m.itl;
    }
    RunMeans {
        ttft: sum.ttft / draws as f64,
        itl: sum.itl / draws as f64,
    }
}

/// The mean TTFT and inter-token time of the run with request `i` of lengths `lengths[i]`
/// (sent in that order), seconds. Deterministic: the event simulation described in the
/// module docs. A request's last token is seen when the step that computed it ends (under
/// overlap its first and last token both leave a step late, which its inter-token time
/// does not see).
///
/// A request sent when another finishes reaches the engine after the next step has begun
/// (the client receives the last token, sends the next prompt over HTTP and the server
/// tokenizes it while the engine has already scheduled its next step), so it joins the step
/// after that one: its TTFT includes one full step of waiting. The first wave arrives at an
/// idle engine.
pub fn run_means(run: &HarnessRun, lengths: &[Lengths], step: &impl StepTime) -> RunMeans {
    let n = lengths.len().min(run.prompts.max(1) as usize);
    if n == 0 {
        return RunMeans::default();
    }
    let slots = run.slots.clamp(1, run.concurrency.max(1)) as usize;
    let budget = run.budget.max(1.0);
    let mut t = 0.0;
    // Decode steps taken so far; a decoding request finishes at the step its key names.
    let mut steps: u64 = 0;
    // (finish step, request, time of its first token).
    let mut decoding: BinaryHeap<Reverse<(u64, usize, Instant)>> = BinaryHeap::new();
    // Sent but not admitted (arrival time, request), and admitted in prefill (arrival,
    // request, prompt tokens left).
    let mut waiting: VecDeque<(f64, usize)> = VecDeque::new();
    let mut prefilling: VecDeque<(f64, usize, f64)> = VecDeque::new();
    // Sent while a step runs: the scheduler sees them when the next one begins.
    let mut pending: Vec<(f64, usize)> = Vec::new();
    let mut sent = 0usize;
    let mut total = 0.0;
    let (mut itl_total, mut itl_count) = (0.0, 0usize);
    // The poll counter: decode steps since the last poll (a step with prompts fills it).
    let interval = run.recv_interval.max(1) as u64;
    let mut since_poll = interval;
    let mut balancer = run.balance.map(|b| Balancer::new(b, n));
    let mut waiter = run.batch_wait.map(|rule| Waiter { rule, count: 0 });
    while sent < n.min(run.concurrency.max(1) as usize) {
        waiting.push_back((0.0, sent));
        if let Some(b) = balancer.as_mut() {
            b.send(sent);
        }
        sent += 1;
    }
    loop {
        while prefilling.len() + decoding.len() < slots {
            let Some((at, i)) = waiting.pop_front() else {
                break;
            };
            prefilling.push_back((at, i, lengths[i].0.max(1.0)));
        }
        let d = decoding.len() as f64;
        let room = if run.mixed {
            (budget - d).max(1.0)
        } else {
            budget
        };
        // The prompts this step would carry, first come first served: (tokens, prompts,
        // prompts finished, their whole lengths).
        let (mut q, mut k, mut done, mut whole) = (0.0, 0.0, 0usize, 0.0);
        for (j, p) in prefilling.iter().enumerate() {
            let left = room - q;
            if left <= 0.0 {
                break;
            }
            if !run.chunked && j > 0 && p.2 > left {
                break;
            }
            let take = if run.chunked { p.2.min(left) } else { p.2 };
            q += take;
            k += 1.0;
            whole += lengths[p.1].0.max(1.0);
            if take >= p.2 {
                done += 1;
            }
        }
        let gate = match (balancer.as_mut(), waiter.as_mut(), prefilling.is_empty()) {
            (Some(b), _, false) => b.gate(prefilling.iter().map(|p| p.1)),
            (None, Some(w), false) if !decoding.is_empty() => w.gate(whole + d),
            _ => Gate::Release,
        };
        if let (
            Gate::Hold {
                iterations,
                counting,
            },
            Some(&Reverse((next, _, _))),
        ) = (gate, decoding.peek())
        {
            // Held prompts: decode-only iterations until the balancer lets them run or a
            // request finishes.
            // A request sent meanwhile is seen at the next poll and may change the decision.
            let mut m = iterations.min(next.saturating_sub(steps));
            if !pending.is_empty() {
                m = m.min(interval.saturating_sub(since_poll));
            }
            let m = m.max(1);
            t += m as f64 * step.step(decoding.len() as f64, 0.0, 0.0);
            steps += m;
            since_poll += m;
            if let (true, Some(b)) = (counting, balancer.as_mut()) {
                b.idle(m);
            }
            if let (true, Some(w)) = (counting, waiter.as_mut()) {
                w.held(m);
            }
        } else if !prefilling.is_empty() {
            let dt = step.step(if run.mixed { d } else { 0.0 }, q, k);
            t += dt;
            if run.mixed {
                steps += 1;
            }
            since_poll = interval;
            // Take the tokens off the queue; the prompts that finished emit their first
            // token and decode the rest.
            let mut left = q;
            for _ in 0..done {
                let (at, i, tokens) = prefilling.pop_front().expect("counted");
                left -= tokens;
                // Under overlap the token leaves later by this step's own length. The
                // engines' documents say one extra step (the host publishes step n's tokens
                // while step n + 1 runs), which after a prefill is the shorter decode step
                // that follows. Priced that way (the next step's end), the dev e2e TTFT goes
                // from 30.6 % to 36.2 % median error and its bias from -0 % to -21 % (-31
                // to -38 % at C <= 8, every engine): some term of about one prefill's length
                // is missing elsewhere, not found yet. Until it is, this stand-in stays [U].
                let ttft = t - at + if run.overlap { dt } else { 0.0 };
                total += ttft;
                let rest = (lengths[i].1.round() - 1.0).max(0.0) as u64;
                // It emitted its first token in this step; it decodes from the next one.
                decoding.push(Reverse((steps + rest, i, Instant(t))));
                if let Some(b) = balancer.as_mut() {
                    b.starts_decoding(i);
                }
            }
            if left > 0.0 {
                if let Some(front) = prefilling.front_mut() {
                    front.2 -= left;
                }
            }
        } else if let Some(&Reverse((next, _, _))) = decoding.peek() {
            // Only decodes until the next finish, or the next poll when a request waits
            // for one: skip to whichever comes first.
            let mut m = next.saturating_sub(steps);
            if !pending.is_empty() {
                m = m.min(interval.saturating_sub(since_poll).max(1));
            }
            if m > 0 {
                t += m as f64 * step.step(decoding.len() as f64, 0.0, 0.0);
                steps += m;
                since_poll += m;
                if let Some(b) = balancer.as_mut() {
                    b.idle(m);
                }
            }
        } else if !pending.is_empty() {
            // An idle engine takes them at once.
            waiting.extend(pending.drain(..));
            continue;
        } else {
            break;
        }
        // The scheduler polls when its counter is full (in a stretch of decodes with nothing
        // waiting, every `interval` steps: the count carries over).
        if since_poll >= interval {
            waiting.extend(pending.drain(..));
            since_poll %= interval;
        }
        // Requests whose last token came: the client sends the next one now.
        while let Some(&Reverse((f, i, first))) = decoding.peek() {
            if f > steps {
                break;
            }
            decoding.pop();
            if let Some(b) = balancer.as_mut() {
                b.finishes(i);
            }
            let rest = (lengths[i].1.round() - 1.0).max(0.0);
            if rest > 0.0 {
                itl_total += (t - first.0) / rest;
                itl_count += 1;
            }
            if sent < n {
                pending.push((t, sent));
                if let Some(b) = balancer.as_mut() {
                    b.send(sent);
                }
                sent += 1;
            }
        }
    }
    RunMeans {
        ttft: total / n as f64,
        itl: if itl_count > 0 {
            itl_total / itl_count as f64
        } else {
            0.0
        },
    }
}

/// A time in the simulation, seconds, ordered so that it can sit in the heap's key (times
/// are finite and never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Instant(f64);

impl Eq for Instant {}

impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Instant {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(c: u32, r: f64) -> HarnessRun {
        HarnessRun {
            concurrency: c,
            slots: c,
            prompts: 10 * c,
            input: 1000.0,
            output: 100.0,
            range_ratio: r,
            budget: 4096.0,
            chunked: true,
            mixed: true,
            overlap: false,
            recv_interval: 1,
            balance: None,
            batch_wait: None,
        }
    }

    /// One request on an idle engine: its prefill's steps, nothing else.
    #[test]
    fn one_request_is_its_own_prefill() {
        let mut r = run(1, 1.0);
        r.input = 10_000.0;
        let step = |_d: f64, _q: f64, _k: f64| 0.01;
        // 10,000 tokens in chunks of the budget, 4,096 (no decode beside it): three steps.
        let t = expected_ttft(&r, &step);
        assert!((t - 0.03).abs() < 1e-12, "{t}");
    }

    /// A burst of C prompts that fill k steps: the first wave's mean is (k + 1) / 2 steps
    /// when every prompt of one step finishes with it.
    #[test]
    fn the_first_wave_queues() {
        let mut r = run(8, 1.0);
        r.prompts = 8;
        r.input = 1024.0;
        // One output token: none stays to decode and take room from the budget.
        r.output = 1.0;
        r.budget = 2048.0;
        let step = |_d: f64, _q: f64, _k: f64| 0.01;
        // Two prompts a step: steps 1..4, mean 2.5 steps.
        let t = expected_ttft(&r, &step);
        assert!((t - 0.025).abs() < 1e-12, "{t}");
    }

    #[test]
    fn drawn_lengths_span_the_range() {
        let r = run(160, 0.8);
        let l = drawn_lengths(&r, 0);
        let mean: f64 = l.iter().map(|x| x.0).sum::<f64>() / l.len() as f64;
        assert!((mean - 900.0).abs() < 5.0, "{mean}");
        assert!(l.iter().all(|x| (800.0..=1000.0).contains(&x.0)));
        assert!(l.iter().all(|x| (80.0..=100.0).contains(&x.1)));
    }
}
