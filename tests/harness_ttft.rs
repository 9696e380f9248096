//! The harness TTFT model (`rooftop::harness::expected_ttft`) against a seeded Monte-Carlo
//! of the harness: 10 × C prompts at an infinite rate through a semaphore of C, lengths
//! fixed or drawn from [0.8 L, L], each run simulated one engine step at a time and the mean
//! TTFT averaged over seeds. The model simulates events, not steps, over a few draws of its
//! own fixed generator: within 5 % of the Monte-Carlo mean at three concurrencies and both
//! length modes.

use rooftop::harness::{
    drawn_lengths, expected_means, expected_ttft, run_means, BatchHold, ContextBalance, HarnessRun,
    RunMeans,
};
use std::collections::VecDeque;

/// A small seeded generator (xorshift64*), so the test needs no crate and never changes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A whole number uniform in [lo, hi].
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// One request of the Monte-Carlo.
struct Req {
    arrival: f64,
    prompt_left: f64,
    output: u64,
    output_left: u64,
    /// When its first token came.
    first: f64,
}

/// The harness simulated one step at a time with drawn lengths: the mean TTFT of one run,
/// and the mean of each request's inter-token time `(E2E − TTFT) / (output − 1)`.
fn monte_carlo(run: &HarnessRun, step: &dyn Fn(f64, f64, f64) -> f64, rng: &mut Rng) -> (f64, f64) {
    let n = run.prompts as usize;
    let draw = |l: f64, rng: &mut Rng| {
        let lo = ((run.range_ratio * l).floor() as u64).max(1);
        rng.between(lo, (l as u64).max(lo))
    };
    let lengths: Vec<(f64, u64)> = (0..n)
        .map(|_| (draw(run.input, rng) as f64, draw(run.output, rng)))
        .collect();
    let mut reqs: Vec<Req> = Vec::with_capacity(n);
    let mut waiting: VecDeque<usize> = VecDeque::new();
    // Admitted requests, in admission order: in prefill while prompt tokens are left.
    let mut running: Vec<usize> = Vec::new();
    let mut t = 0.0;
    let mut ttft_sum = 0.0;
    let (mut itl_sum, mut itl_n) = (0.0, 0usize);
    // Sent while a step ran: seen by the scheduler from the step after.
    let mut pending: VecDeque<usize> = VecDeque::new();
    let send = |reqs: &mut Vec<Req>, queue: &mut VecDeque<usize>, t: f64| {
        let i = reqs.len();
        reqs.push(Req {
            arrival: t,
            prompt_left: lengths[i].0,
            output: lengths[i].1,
            output_left: lengths[i].1,
            first: 0.0,
        });
        queue.push_back(i);
    };
    for _ in 0..(run.concurrency as usize).min(n) {
        send(&mut reqs, &mut pending, 0.0);
    }
    waiting.extend(pending.drain(..));
    let mut finished = 0;
    // Context balancing over attention ranks (TensorRT-LLM's _balance_adp_requests), one
    // iteration at a time: each request's rank, the requests per rank, the two counters.
    let ranks = run.balance.map_or(1, |b| b.ranks.max(1) as usize);
    let mut rank_of: Vec<usize> = Vec::with_capacity(n);
    let mut per_rank = vec![0u32; ranks];
    let (mut waited, mut batched) = (0u32, 0u32);
    let route = |rank_of: &mut Vec<usize>, per_rank: &mut Vec<u32>| {
        let mut best = 0;
        for r in 1..per_rank.len() {
            if per_rank[r] < per_rank[best] {
                best = r;
            }
        }
        rank_of.push(best);
        per_rank[best] += 1;
    };
    for _ in 0..reqs.len() {
        route(&mut rank_of, &mut per_rank);
    }
    // SGLang's poll counter (scheduler_recv_skipper.py): +1 per decode step, full after a
    // step with prompts; the scheduler receives only when it is full, then restarts at 0.
    let interval = run.recv_interval.max(1) as u64;
    let mut counter = interval;
    // TensorRT-LLM's batch-waiting counter (py_executor.py _waiting_requests).
    let mut wait_count = 0u32;
    while finished < n {
        while running.len() < run.slots as usize {
            match waiting.pop_front() {
                Some(i) => running.push(i),
                None => break,
            }
        }
        let decoders: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&i| reqs[i].prompt_left <= 0.0)
            .collect();
        let in_prefill: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&i| reqs[i].prompt_left > 0.0)
            .collect();
        if running.is_empty() {
            // Idle: what was sent is scheduled at once.
            waiting.extend(pending.drain(..));
            continue;
        }
        let d = decoders.len() as f64;
        let mut ended: Vec<usize> = Vec::new();
        // This iteration's balancing decision: may the prompts run?
        let mut release = true;
        if let Some(b) = run.balance {
            let (mut ctx, mut gen) = (vec![false; ranks], vec![false; ranks]);
            for &i in &in_prefill {
                ctx[rank_of[i]] = true;
            }
            for &i in &decoders {
                gen[rank_of[i]] = true;
            }
            let all_gen = gen.iter().all(|&g| g);
            if ctx.iter().all(|&c| c) {
                waited = 0;
                if all_gen && batched < b.batching_wait {
                    batched += 1;
                    release = false;
                } else {
                    batched = 0;
                }
            } else {
                waited += 1;
                release = false;
                if waited >= b.timeout || !all_gen {
                    waited = 0;
                    release = true;
                }
            }
        }
        // Batch waiting: with prompts to prefill and requests decoding, the prompts run
        // once what the iteration would schedule (their whole lengths, one per decode)
        // reaches the threshold or the counter has reached the timeout.
        if let (Some(w), false, false) =
            (run.batch_wait, in_prefill.is_empty(), decoders.is_empty())
        {
            let room = if run.mixed {
                (run.budget - d).max(1.0)
            } else {
                run.budget
            };
            let (mut q, mut whole) = (0.0, 0.0);
            for (j, &i) in in_prefill.iter().enumerate() {
                let left = room - q;
                if left <= 0.0 || (!run.chunked && j > 0 && reqs[i].prompt_left > left) {
                    break;
                }
                q += if run.chunked {
                    reqs[i].prompt_left.min(left)
                } else {
                    reqs[i].prompt_left
                };
                whole += lengths[i].0;
            }
            if wait_count >= w.timeout || whole + d >= w.tokens {
                wait_count = 0;
            } else {
                wait_count += 1;
                release = false;
            }
        }
        if !in_prefill.is_empty() && release {
            let room = if run.mixed {
                (run.budget - d).max(1.0)
            } else {
                run.budget
            };
            let (mut q, mut k) = (0.0, 0.0);
            let mut done: Vec<usize> = Vec::new();
            for (j, &i) in in_prefill.iter().enumerate() {
                let left = room - q;
                if left <= 0.0 || (!run.chunked && j > 0 && reqs[i].prompt_left > left) {
                    break;
                }
                let take = if run.chunked {
                    reqs[i].prompt_left.min(left)
                } else {
                    reqs[i].prompt_left
                };
                q += take;
                k += 1.0;
                reqs[i].prompt_left -= take;
                if reqs[i].prompt_left <= 0.0 {
                    done.push(i);
                }
            }
            let dt = step(if run.mixed { d } else { 0.0 }, q, k);
            t += dt;
            counter += 1000;
            if run.mixed {
                for &i in &decoders {
                    reqs[i].output_left -= 1;
                    if reqs[i].output_left == 0 {
                        ended.push(i);
                    }
                }
            }
            for &i in &done {
                ttft_sum += t - reqs[i].arrival + if run.overlap { dt } else { 0.0 };
                reqs[i].first = t;
                reqs[i].output_left -= 1;
                if reqs[i].output_left == 0 {
                    ended.push(i);
                }
            }
        } else {
            t += step(d, 0.0, 0.0);
            counter += 1;
            for &i in &decoders {
                reqs[i].output_left -= 1;
                if reqs[i].output_left == 0 {
                    ended.push(i);
                }
            }
        }
        if counter >= interval {
            waiting.extend(pending.drain(..));
            counter = 0;
        }
        for i in ended {
            if reqs[i].output > 1 {
                itl_sum += (t - reqs[i].first) / (reqs[i].output - 1) as f64;
                itl_n += 1;
            }
            running.retain(|&r| r != i);
            per_rank[rank_of[i]] -= 1;
            finished += 1;
            if reqs.len() < n {
                send(&mut reqs, &mut pending, t);
                route(&mut rank_of, &mut per_rank);
            }
        }
    }
    (ttft_sum / n as f64, itl_sum / itl_n.max(1) as f64)
}

/// A step that costs a fixed part, per decoding sequence and per prompt token (an engine
/// with a memory-bound decode and a compute-bound prefill), seconds.
fn step(d: f64, q: f64, k: f64) -> f64 {
    0.006 + 3e-5 * d + 8e-6 * q + 1e-4 * k
}

fn harness(c: u32, range_ratio: f64, chunked: bool, overlap: bool) -> HarnessRun {
    harness_mixing(c, range_ratio, chunked, chunked, overlap)
}

/// As [`harness`], with prefill mixing into the decode steps or not (SGLang's prefill-first
/// scheduler) apart from whether a prompt may be split.
fn harness_mixing(
    c: u32,
    range_ratio: f64,
    chunked: bool,
    mixed: bool,
    overlap: bool,
) -> HarnessRun {
    HarnessRun {
        concurrency: c,
        slots: c,
        prompts: 10 * c,
        input: 1024.0,
        output: 192.0,
        range_ratio,
        budget: 8192.0,
        chunked,
        mixed,
        overlap,
        recv_interval: 1,
        balance: None,
        batch_wait: None,
    }
}

/// The Monte-Carlo's mean TTFT and inter-token time of `run` (40 seeded runs with drawn
/// lengths, one with fixed ones), seconds.
fn monte_carlo_means(run: &HarnessRun, seed: u64) -> RunMeans {
    // Polls and context balancing make one run vary more: more seeds.
    let seeds = match (
        run.range_ratio < 1.0,
        run.recv_interval > 1 || run.balance.is_some() || run.batch_wait.is_some(),
    ) {
        (false, _) => 1,
        (true, false) => 40,
        (true, true) => 120,
    };
    let mut rng = Rng(seed);
    let (mut ttft, mut itl) = (0.0, 0.0);
    for _ in 0..seeds {
        let (a, b) = monte_carlo(run, &step, &mut rng);
        ttft += a;
        itl += b;
    }
    RunMeans {
        ttft: ttft / seeds as f64,
        itl: itl / seeds as f64,
    }
}

/// The model's mean TTFT and inter-token time each within 5 % of the Monte-Carlo's; `case`
/// names the run in the message.
fn assert_within_five_percent(model: &RunMeans, mc: &RunMeans, case: &str) {
    for (what, m, x) in [("TTFT", model.ttft, mc.ttft), ("ITL", model.itl, mc.itl)] {
        let err = (m - x) / x;
        assert!(
            err.abs() <= 0.05,
            "{what} {case}: model {:.3} ms, Monte-Carlo {:.3} ms ({:+.1} %)",
            m * 1e3,
            x * 1e3,
            err * 100.0
        );
    }
}

/// The model's mean TTFT of `run`, the Monte-Carlo's, and the model's relative error,
/// seconds.
fn against_monte_carlo(run: &HarnessRun, seed: u64) -> (f64, f64, f64) {
    let model = expected_ttft(run, &step);
    let mc = monte_carlo_means(run, seed).ttft;
    (model, mc, (model - mc) / mc)
}

/// Every scheduling mode: prefill mixed into the decode steps in chunks (vLLM), the same
/// with overlap, whole prompts in passes of their own, and SGLang's prefill first in chunks
/// with overlap. The mean TTFT and the mean inter-token time both follow the Monte-Carlo.
#[test]
fn the_model_matches_a_monte_carlo_of_the_harness() {
    for (chunked, mixed, overlap) in [
        (true, true, false),
        (true, true, true),
        (false, false, false),
        (true, false, true),
    ] {
        for c in [4, 32, 128] {
            for r in [1.0, 0.8] {
                let run = harness_mixing(c, r, chunked, mixed, overlap);
                let model = expected_means(&run, &step);
                let mc = monte_carlo_means(&run, 0x9e37_79b9_7f4a_7c15 ^ c as u64);
                assert_within_five_percent(
                    &model,
                    &mc,
                    &format!(
                        "C={c} range ratio {r} chunked {chunked} mixed {mixed} overlap {overlap}"
                    ),
                );
            }
        }
    }
}

/// Prefill first (SGLang): a burst of fixed-length prompts is prefilled whole before any of
/// them decodes, so the wave finishes together and the next one arrives at once again; its
/// mean TTFT is then about half a wave's prefill, far above the same engine mixing prefill
/// into its decode steps, where the first wave's prompts finish apart and later ones arrive
/// spread out.
#[test]
fn prefill_first_keeps_fixed_length_waves_together() {
    let first = expected_means(&harness_mixing(128, 1.0, true, false, false), &step);
    let mixed = expected_means(&harness_mixing(128, 1.0, true, true, false), &step);
    // One wave: 128 prompts of 1,024 tokens, 16 steps of 8,192 tokens.
    let wave = 16.0 * step(0.0, 8192.0, 8.0);
    assert!(
        first.ttft > 0.4 * wave && first.ttft < 0.7 * wave,
        "prefill first: {:.1} ms against a wave of {:.1} ms",
        first.ttft * 1e3,
        wave * 1e3
    );
    assert!(first.ttft > 2.0 * mixed.ttft, "{first:?} vs {mixed:?}");
}

/// A scheduler that polls for new requests every 10 or 30 decode steps (SGLang's
/// `--scheduler-recv-interval`, as InferenceMAX's launch scripts set it): the model follows
/// the Monte-Carlo at three concurrencies and both length modes, and polling less often
/// never shortens the TTFT.
#[test]
fn a_scheduler_that_polls_every_n_steps_matches_the_monte_carlo() {
    for chunked in [true, false] {
        for interval in [10, 30] {
            for c in [4, 32, 128] {
                for r in [1.0, 0.8] {
                    let mut run = harness(c, r, chunked, true);
                    run.recv_interval = interval;
                    let seed = 0x51ed_2700 ^ (c as u64) << 8 ^ interval as u64;
                    let (model, mc, err) = against_monte_carlo(&run, seed);
                    assert!(
                        err.abs() <= 0.05,
                        "interval {interval} C={c} range ratio {r} chunked {chunked}: model {:.2} ms, Monte-Carlo {:.2} ms ({:+.1} %)",
                        model * 1e3,
                        mc * 1e3,
                        err * 100.0
                    );
                    run.recv_interval = 1;
                    let every_step = expected_ttft(&run, &step);
                    assert!(
                        model >= every_step,
                        "interval {interval} C={c}: {model} below polling every step {every_step}"
                    );
                }
            }
        }
    }
}

/// The engine running fewer requests than the client sends: the rest wait for a slot, and
/// the model still follows the Monte-Carlo.
#[test]
fn a_slot_limit_below_the_clients_concurrency_is_waited_for() {
    let mut run = harness(64, 0.8, true, false);
    run.slots = 16;
    let model = expected_ttft(&run, &step);
    let mut rng = Rng(7);
    let mc = (0..40)
        .map(|_| monte_carlo(&run, &step, &mut rng).0)
        .sum::<f64>()
        / 40.0;
    assert!(((model - mc) / mc).abs() <= 0.05, "{model} vs {mc}");
    let free = expected_ttft(&harness(64, 0.8, true, false), &step);
    assert!(model > free, "{model} vs {free}");
}

/// TensorRT-LLM's context balancing over eight attention ranks, as InferenceMAX's
/// DeepSeek-R1 scripts set it (timeout 60, no batching wait) and at its defaults (50, 10):
/// the model follows the Monte-Carlo at three concurrencies and both length modes, and
/// holding prompts never shortens the TTFT. At C = 8 (one request per rank) a rank whose
/// request finishes has nothing to decode, so nothing is held.
#[test]
fn context_balancing_over_attention_ranks_matches_the_monte_carlo() {
    for (timeout, batching_wait) in [(60, 0), (50, 10)] {
        for c in [8, 64, 128] {
            for r in [1.0, 0.8] {
                let mut run = harness(c, r, true, true);
                run.balance = Some(ContextBalance {
                    ranks: 8,
                    timeout,
                    batching_wait,
                });
                let seed = 0xba1a_0000 ^ (c as u64) << 8 ^ timeout as u64;
                let model = expected_means(&run, &step);
                let mc = monte_carlo_means(&run, seed);
                assert_within_five_percent(
                    &model,
                    &mc,
                    &format!("timeout {timeout} wait {batching_wait} C={c} range ratio {r}"),
                );
                let free = expected_ttft(&harness(c, r, true, true), &step);
                assert!(
                    model.ttft >= free * (1.0 - 1e-9),
                    "C={c}: balancing {} ms below none {} ms",
                    model.ttft * 1e3,
                    free * 1e3
                );
                if c == 8 && batching_wait == 0 {
                    // The same draw of lengths with and without balancing.
                    let lengths = drawn_lengths(&run, 0);
                    let free_run = harness(c, r, true, true);
                    let (held, free) = (
                        run_means(&run, &lengths, &step).ttft,
                        run_means(&free_run, &lengths, &step).ttft,
                    );
                    assert!(
                        (held - free).abs() <= 1e-9 * free,
                        "one request per rank is never held: {} vs {} ms",
                        held * 1e3,
                        free * 1e3
                    );
                }
            }
        }
    }
}

/// TensorRT-LLM's batch waiting as InferenceMAX's Llama-3.1-70B scripts set it (timeout 20,
/// 0.9 of the budget) and as its DeepSeek-R1 FP8 script does (40, 0.8): the model follows the
/// Monte-Carlo at three concurrencies and both length modes; holding prompts never
/// shortens the TTFT; one prompt sent into a busy engine with no other about waits the
/// whole timeout, so at light load with drawn lengths the TTFT grows by half the timeout's
/// decode steps to all of them; a threshold every prompt reaches holds nothing.
#[test]
fn batch_waiting_matches_the_monte_carlo() {
    for (timeout, ratio) in [(20, 0.9), (40, 0.8)] {
        for c in [4, 32, 128] {
            for r in [1.0, 0.8] {
                let mut run = harness(c, r, true, false);
                let tokens = ratio * run.budget;
                run.batch_wait = Some(BatchHold { timeout, tokens });
                let seed = 0xba7c_0000 ^ (c as u64) << 8 ^ timeout as u64;
                let model = expected_means(&run, &step);
                let mc = monte_carlo_means(&run, seed);
                assert_within_five_percent(
                    &model,
                    &mc,
                    &format!("timeout {timeout} ratio {ratio} C={c} range ratio {r}"),
                );
                let free = expected_ttft(&harness(c, r, true, false), &step);
                assert!(
                    model.ttft >= free * (1.0 - 1e-9),
                    "C={c}: waiting {} ms below none {} ms",
                    model.ttft * 1e3,
                    free * 1e3
                );
                if c == 4 && r < 1.0 {
                    // Drawn lengths finish apart: three others decode while one prompt
                    // waits the timeout's steps, less for those that join its window and
                    // for the first wave (never held), never more. (Fixed lengths finish in
                    // lockstep, and a wave that arrives with nothing decoding is not held.)
                    let held = timeout as f64 * step(3.0, 0.0, 0.0);
                    let extra = model.ttft - free;
                    assert!(
                        extra > 0.5 * held && extra <= held,
                        "C=4: {} ms more, the timeout is {} ms of decode steps",
                        extra * 1e3,
                        held * 1e3
                    );
                }
                run.batch_wait = Some(BatchHold {
                    timeout,
                    tokens: 1.0,
                });
                let lengths = drawn_lengths(&run, 0);
                let (held, none) = (
                    run_means(&run, &lengths, &step).ttft,
                    run_means(&harness(c, r, true, false), &lengths, &step).ttft,
                );
                assert!(
                    (held - none).abs() <= 1e-9 * none,
                    "a threshold every prompt reaches holds nothing: {} vs {} ms",
                    held * 1e3,
                    none * 1e3
                );
            }
        }
    }
}
