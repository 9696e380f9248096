//! The harness TTFT model (`rooftop::harness::expected_ttft`) against a seeded Monte-Carlo
//! of the harness: 10 × C prompts at an infinite rate through a semaphore of C, lengths
//! fixed or drawn from [0.8 L, L], each run simulated one engine step at a time and the mean
//! TTFT averaged over seeds. The model simulates events, not steps, over a few draws of its
//! own fixed generator: within 5 % of the Monte-Carlo mean at three concurrencies and both
//! length modes.

use rooftop::harness::{expected_ttft, HarnessRun};
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
    output_left: u64,
}

/// The harness simulated one step at a time with drawn lengths: the mean TTFT of one run.
fn monte_carlo(run: &HarnessRun, step: &dyn Fn(f64, f64, f64) -> f64, rng: &mut Rng) -> f64 {
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
    // Sent while a step ran: seen by the scheduler from the step after.
    let mut pending: VecDeque<usize> = VecDeque::new();
    let send = |reqs: &mut Vec<Req>, queue: &mut VecDeque<usize>, t: f64| {
        let i = reqs.len();
        reqs.push(Req {
            arrival: t,
            prompt_left: lengths[i].0,
            output_left: lengths[i].1,
        });
        queue.push_back(i);
    };
    for _ in 0..(run.concurrency as usize).min(n) {
        send(&mut reqs, &mut pending, 0.0);
    }
    waiting.extend(pending.drain(..));
    let mut finished = 0;
    // SGLang's poll counter (scheduler_recv_skipper.py): +1 per decode step, full after a
    // step with prompts; the scheduler receives only when it is full, then restarts at 0.
    let interval = run.recv_interval.max(1) as u64;
    let mut counter = interval;
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
        if !in_prefill.is_empty() {
            let room = if run.chunked {
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
            let dt = step(if run.chunked { d } else { 0.0 }, q, k);
            t += dt;
            counter += 1000;
            if run.chunked {
                for &i in &decoders {
                    reqs[i].output_left -= 1;
                    if reqs[i].output_left == 0 {
                        ended.push(i);
                    }
                }
            }
            for &i in &done {
                ttft_sum += t - reqs[i].arrival + if run.overlap { dt } else { 0.0 };
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
            running.retain(|&r| r != i);
            finished += 1;
            if reqs.len() < n {
                send(&mut reqs, &mut pending, t);
            }
        }
    }
    ttft_sum / n as f64
}

/// A step that costs a fixed part, per decoding sequence and per prompt token (an engine
/// with a memory-bound decode and a compute-bound prefill), seconds.
fn step(d: f64, q: f64, k: f64) -> f64 {
    0.006 + 3e-5 * d + 8e-6 * q + 1e-4 * k
}

fn harness(c: u32, range_ratio: f64, chunked: bool, overlap: bool) -> HarnessRun {
    HarnessRun {
        concurrency: c,
        slots: c,
        prompts: 10 * c,
        input: 1024.0,
        output: 192.0,
        range_ratio,
        budget: 8192.0,
        chunked,
        overlap,
        recv_interval: 1,
    }
}

/// The model's mean TTFT of `run`, the Monte-Carlo's (40 seeded runs with drawn lengths, one
/// with fixed ones), and the model's relative error, seconds.
fn against_monte_carlo(run: &HarnessRun, seed: u64) -> (f64, f64, f64) {
    let model = expected_ttft(run, &step);
    let seeds = if run.range_ratio < 1.0 { 40 } else { 1 };
    let mut rng = Rng(seed);
    let mc = (0..seeds)
        .map(|_| monte_carlo(run, &step, &mut rng))
        .sum::<f64>()
        / seeds as f64;
    (model, mc, (model - mc) / mc)
}

#[test]
fn the_model_matches_a_monte_carlo_of_the_harness() {
    for (chunked, overlap) in [(true, false), (true, true), (false, false)] {
        for c in [4, 32, 128] {
            for r in [1.0, 0.8] {
                let run = harness(c, r, chunked, overlap);
                let (model, mc, err) = against_monte_carlo(&run, 0x9e37_79b9_7f4a_7c15 ^ c as u64);
                assert!(
                    err.abs() <= 0.05,
                    "C={c} range ratio {r} chunked {chunked} overlap {overlap}: model {:.2} ms, Monte-Carlo {:.2} ms ({:+.1} %)",
                    model * 1e3,
                    mc * 1e3,
                    err * 100.0
                );
            }
        }
    }
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
        .map(|_| monte_carlo(&run, &step, &mut rng))
        .sum::<f64>()
        / 40.0;
    assert!(((model - mc) / mc).abs() <= 0.05, "{model} vs {mc}");
    let free = expected_ttft(&harness(64, 0.8, true, false), &step);
    assert!(model > free, "{model} vs {free}");
}
