//! How many distinct experts a batch touches.
//!
//! Decode cost of an MoE layer is the weight bytes of the experts the batch routes to. With E
//! experts, top-k routing and B tokens routed independently and uniformly, each expert is
//! missed by one token with probability (1 − k/E), so the expected number touched is
//! `E × (1 − (1 − k/E)^B)`: it grows with batch until every expert is read, then flattens.
//! (Sampling k distinct experts per token makes each expert's inclusion probability exactly
//! k/E, so the formula is exact in expectation for uniform routing.)

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;

/// How tokens spread over experts: a model parameter (`routing` in a model description,
/// default balanced; `--set model.routing="power-law 1.2"`).
///
/// Balanced: every token picks `k` experts uniformly. Round robin: the tokens' `tokens × k`
/// picks are dealt to the experts in turn, so `min(experts, tokens × k)` distinct experts
/// each receive the same share (a perfectly balancing router; the measured MoE tables'
/// `balanced` rows were generated this way). Power law with exponent α: expert
/// loads are independent draws from a power law `p(x) ∝ x^-α` (between 1 and 0.8 × tokens
/// when the batch fills the experts, else between 0.01 and 2), scaled to `tokens × k`, as
/// the measured MoE tables' `power_law_α` rows were generated (aiconfigurator's collector);
/// the expected order statistics stand in for the draws.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Routing {
    #[default]
    Balanced,
    RoundRobin,
    /// The round-robin deal fed to a group-limited router (DeepSeek-V3's: the experts in
    /// `groups` equal groups, each token confined to the `topk_groups` groups of highest
    /// score) that breaks ties toward low indices, as a benchmark harness hands one-hot
    /// logits to it: every token's picks score alike in every group, so every token keeps
    /// the first `topk_groups` groups, its own pick in each, and fills its other picks with
    /// the lowest experts of those groups (`group_limited_loads`). Only `validate` prices a
    /// measured row this way; a model's router keeps its balance.
    RoundRobinGroupLimited {
        groups: u32,
        topk_groups: u32,
    },
    PowerLaw(f64),
}

impl FromStr for Routing {
    type Err = String;
    fn from_str(s: &str) -> Result<Routing, String> {
        let t = s.trim().to_ascii_lowercase().replace(['_', '-'], " ");
        if t == "balanced" {
            return Ok(Routing::Balanced);
        }
        if t == "round robin" {
            return Ok(Routing::RoundRobin);
        }
        if let Some(gt) = t.strip_prefix("round robin group limited ") {
            let parsed = gt.split_once('/').and_then(|(g, k)| {
                Some((g.trim().parse::<u32>().ok()?, k.trim().parse::<u32>().ok()?))
            });
            return match parsed {
                Some((groups, topk_groups)) if topk_groups >= 1 && topk_groups <= groups => {
                    Ok(Routing::RoundRobinGroupLimited {
                        groups,
                        topk_groups,
                    })
                }
                _ => Err(format!(
                    "routing \"{s}\": expected \"round-robin group-limited G/T\" with 1 <= T <= G"
                )),
            };
        }
        let a = t
            .strip_prefix("power law")
            .map(str::trim)
            .and_then(|a| a.parse::<f64>().ok())
            .filter(|a| a.is_finite() && *a > 0.0 && *a <= 10.0)
            .ok_or_else(|| {
                format!(
                    "routing \"{s}\": expected \"balanced\", \"round-robin\" or \"power-law A\" with 0 < A <= 10"
                )
            })?;
        Ok(Routing::PowerLaw(a))
    }
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routing::Balanced => write!(f, "balanced"),
            Routing::RoundRobin => write!(f, "round-robin"),
            Routing::RoundRobinGroupLimited {
                groups,
                topk_groups,
            } => write!(f, "round-robin group-limited {groups}/{topk_groups}"),
            Routing::PowerLaw(a) => write!(f, "power-law {a}"),
        }
    }
}

impl Serialize for Routing {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Routing {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What the busiest expert-parallel rank computes in one fused-MoE call.
#[derive(Debug, Clone, PartialEq)]
pub struct RankLoad {
    /// Experts on the rank that receive at least one token.
    pub touched: f64,
    /// Token-expert pairs the rank computes.
    pub pairs: f64,
    /// Expected tokens per touched expert, largest first.
    pub loads: Loads,
}

/// (tokens per expert, experts with that load) pairs: one for balanced routing (no
/// allocation on the hot path), one per expert for skewed routing.
#[derive(Debug, Clone, PartialEq)]
pub enum Loads {
    Uniform(f64, f64),
    PerExpert(Vec<(f64, f64)>),
}

impl Loads {
    pub fn iter(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let (one, many) = match self {
            Loads::Uniform(l, n) => (Some((*l, *n)), &[][..]),
            Loads::PerExpert(v) => (None, &v[..]),
        };
        one.into_iter().chain(many.iter().copied())
    }

    /// The largest expected load.
    pub fn max(&self) -> f64 {
        self.iter().map(|(l, _)| l).fold(0.0, f64::max)
    }
}

/// Expected load of the busiest of `ep` ranks holding `experts / ep` experts each, and
/// `redundant` more slots for EPLB's replicas, when `tokens` tokens each pick `top_k`
/// experts under `routing`. `mean_touched` is what uniform routing touches per rank,
/// `expected_experts_touched(slots, top_k, tokens) / ep`: the operator that carries this
/// shape has it already. Under skewed routing the replicas go where EPLB puts them
/// ([`eplb_busiest`]); under balanced routing every rank already carries the mean.
pub fn busiest_rank(
    experts: f64,
    top_k: f64,
    tokens: f64,
    ep: f64,
    routing: Routing,
    mean_touched: f64,
    redundant: f64,
) -> RankLoad {
    let redundant = redundant.max(0.0).round();
    let local = (experts / ep).max(1.0) + redundant;
    let pairs_all = tokens * top_k;
    if tokens <= 0.0 || experts <= 0.0 {
        return RankLoad {
            touched: 0.0,
            pairs: 0.0,
            loads: Loads::PerExpert(Vec::new()),
        };
    }
    if let Routing::RoundRobinGroupLimited {
        groups,
        topk_groups,
    } = routing
    {
        if let Some(loads) = group_limited_loads(experts, top_k, tokens, ep, groups, topk_groups) {
            return loads;
        }
    }
    match routing {
        Routing::Balanced | Routing::RoundRobin | Routing::RoundRobinGroupLimited { .. } => {
            // The busiest rank touches at least one expert.
            let touched = mean_touched.max(1.0).min(local);
            let pairs = pairs_all / ep;
            RankLoad {
                touched,
                pairs,
                loads: Loads::Uniform(pairs / touched, touched),
            }
        }
        Routing::PowerLaw(alpha) => {
            let e = experts.round().max(1.0) as usize;
            let (lo, hi): (f64, f64) = if pairs_all > experts {
                (1.0, (0.8 * tokens).max(1.0))
            } else {
                (0.01, 2.0)
            };
            let a = if (alpha - 1.0).abs() < 1e-6 {
                1.0 + 1e-6
            } else {
                alpha
            };
            let (l1, h1) = (lo.powf(1.0 - a), hi.powf(1.0 - a));
            // Expected order statistics, largest first: quantiles (e - i - 0.5) / e.
            let mut x: Vec<f64> = (0..e)
                .map(|i| {
                    let u = (e as f64 - i as f64 - 0.5) / e as f64;
                    ((h1 - l1) * u + l1).powf(1.0 / (1.0 - a))
                })
                .collect();
            let s: f64 = x.iter().sum();
            x.iter_mut().for_each(|v| *v *= pairs_all / s);
            // No expert receives a token twice: cap at `tokens`, give the excess to the rest.
            for _ in 0..8 {
                let over: f64 = x.iter().map(|v| (v - tokens).max(0.0)).sum();
                if over <= 1e-9 {
                    break;
                }
                let free: f64 = x.iter().filter(|v| **v < tokens).sum();
                if free <= 0.0 {
                    break;
                }
                x.iter_mut().for_each(|v| {
                    *v = if *v >= tokens {
                        tokens
                    } else {
                        *v + over * *v / free
                    }
                });
            }
            // Whole tokens (`round_like_collector`): with fewer pairs than experts most
            // shares round to none and the pairs land one per expert on `tokens × k`
            // distinct experts, as balanced routing places them; near `experts / k`
            // tokens the experts whose shares round to none stay untouched.
            round_like_collector(&mut x, pairs_all);
            let n = local.round() as usize;
            let mine = if redundant > 0.0 {
                eplb_busiest(&x, ep.round().max(1.0) as usize, n)
            } else {
                // The busiest rank holds the busiest expert and `local - 1` others spread
                // over the rest of the order statistics.
                let mut mine = vec![x[0]];
                if n > 1 && e > 1 {
                    let step = (e - 1) as f64 / (n - 1) as f64;
                    mine.extend(
                        (0..n - 1).map(|j| x[1 + ((step * (j as f64 + 0.5)) as usize).min(e - 2)]),
                    );
                }
                mine
            };
            let pairs: f64 = mine.iter().sum::<f64>().max(pairs_all / ep);
            // An expert whose expected load rounds to no token is not touched (the busiest is).
            let loads: Vec<(f64, f64)> = mine
                .iter()
                .enumerate()
                .filter(|(i, v)| *i == 0 || **v >= 0.5)
                .map(|(_, v)| (v.max(1.0), 1.0))
                .collect();
            RankLoad {
                touched: loads.len() as f64,
                pairs,
                loads: Loads::PerExpert(loads),
            }
        }
    }
}

/// The busiest rank's replica loads once EPLB has placed experts of expected loads `x`
/// (largest first) on `ep` ranks of `slots` slots each, as DeepSeek's EPLB does it
/// (`eplb.py`, global policy): the `ep × slots − E` extra slots go one at a time to the
/// expert whose load per replica is highest (`replicate_experts`), each replica takes an
/// equal share of its expert's tokens, and the replicas, heaviest first, each go to the least
/// loaded rank with a free slot (`balanced_packing`) [V: github.com/deepseek-ai/EPLB].
pub fn eplb_busiest(x: &[f64], ep: usize, slots: usize) -> Vec<f64> {
    let e = x.len();
    if e == 0 || ep == 0 || slots == 0 {
        return Vec::new();
    }
    let mut count = vec![1usize; e];
    let extra = (ep * slots).saturating_sub(e);
    // Load per replica, highest first; ties to the lower index, as torch's max does.
    let mut heap: BinaryHeap<(PerReplica, Reverse<usize>)> = x
        .iter()
        .enumerate()
        .map(|(i, &l)| (PerReplica(l), Reverse(i)))
        .collect();
    for _ in 0..extra {
        let Some((_, Reverse(i))) = heap.pop() else {
            break;
        };
        count[i] += 1;
        heap.push((PerReplica(x[i] / count[i] as f64), Reverse(i)));
    }
    let mut replicas: Vec<f64> = x
        .iter()
        .zip(&count)
        .flat_map(|(&l, &c)| std::iter::repeat_n(l / c as f64, c))
        .collect();
    replicas.sort_by(|a, b| b.total_cmp(a));
    let mut load = vec![0.0f64; ep];
    let mut held: Vec<Vec<f64>> = vec![Vec::with_capacity(slots); ep];
    for r in replicas {
        let to = (0..ep)
            .filter(|&g| held[g].len() < slots)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]));
        let Some(g) = to else {
            break;
        };
        load[g] += r;
        held[g].push(r);
    }
    let busiest = (0..ep)
        .max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)))
        .unwrap_or(0);
    std::mem::take(&mut held[busiest])
}

/// A load compared as a float for the replication heap (loads are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PerReplica(f64);

impl Eq for PerReplica {}

impl PartialOrd for PerReplica {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PerReplica {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Round expected per-expert loads `x` (largest first, summing to `target`) to whole tokens,
/// as the measured tables' collector hands them out: each share rounded, then the tokens
/// rounding lost given one each to the least loaded experts (cycling), or the surplus taken
/// one each from the least loaded (from the busiest where that one has none). The tables bear
/// the giving-out order: with `tokens × k` well under `experts` nearly every share rounds to
/// none, and the `power_law_*` rows measure as their balanced twins (one token on each of
/// `tokens × k` experts), not as fewer experts with two tokens each.
fn round_like_collector(x: &mut [f64], target: f64) {
    let n = x.len();
    if n == 0 {
        return;
    }
    x.iter_mut().for_each(|v| *v = v.round());
    let delta = target.round() - x.iter().sum::<f64>();
    if delta > 0.0 {
        // Whole cycles first, then one each to the least loaded.
        let (cycles, rest) = ((delta / n as f64).floor(), (delta as usize) % n);
        x.iter_mut().for_each(|v| *v += cycles);
        x.iter_mut().rev().take(rest).for_each(|v| *v += 1.0);
    } else {
        for i in 0..(-delta) as usize {
            let j = n - 1 - (i % n);
            if x[j] > 0.0 {
                x[j] -= 1.0;
            } else {
                x[0] -= 1.0;
            }
        }
    }
    // Keep the busiest first.
    x.sort_by(|a, b| b.total_cmp(a));
}

/// Rank 0's load (experts `0 .. experts / ep`, the busiest: it holds the experts every
/// token's fill lands on) when `tokens` tokens' `top_k` dealt picks pass a router that keeps
/// `topk_groups` of `groups` groups and breaks ties toward low indices
/// (`Routing::RoundRobinGroupLimited`). `None` where the deal does not give each token one
/// pick per group (`top_k != groups`, or groups of unequal size), which this does not cover.
///
/// With `s = experts / groups` (the deal's stride), token i's picks sit at the same offset
/// `o_i` in every group (`o_i = i mod s`, or `floor(i s / tokens)` for fewer tokens than
/// `s`). The group scores tie, so every token keeps groups `0 .. topk_groups`, its pick
/// in each, and fills its other `F = top_k - topk_groups` picks with the lowest experts of
/// those groups it has not picked. So expert `e < F` receives every token, expert `F` the
/// tokens with `o_i <= F`, any other kept expert `g s + o` the tokens with `o_i = o`, and
/// the experts of the other groups none.
fn group_limited_loads(
    experts: f64,
    top_k: f64,
    tokens: f64,
    ep: f64,
    groups: u32,
    topk_groups: u32,
) -> Option<RankLoad> {
    let (e, k, g) = (experts.round(), top_k.round(), groups as f64);
    if groups == 0 || topk_groups == 0 || topk_groups > groups || k != g || e % g != 0.0 {
        return None;
    }
    let s = (e / g) as usize;
    let t = tokens.round().max(0.0) as usize;
    let local = (e / ep.max(1.0)).floor().max(1.0) as usize;
    let fill = (groups - topk_groups) as usize;
    // Tokens per offset within a group.
    let mut at = vec![0.0_f64; s];
    if t >= s {
        at.iter_mut()
            .enumerate()
            .for_each(|(o, c)| *c = (t / s + usize::from(o < t % s)) as f64);
    } else {
        (0..t).for_each(|i| at[i * s / t] += 1.0);
    }
    let kept = topk_groups as usize * s;
    let mut loads: Vec<(f64, f64)> = (0..local.min(kept))
        .map(|x| {
            let o = x % s;
            let load = if x < fill {
                t as f64
            } else if x == fill {
                at[..=fill.min(s - 1)].iter().sum()
            } else {
                at[o]
            };
            (load, 1.0)
        })
        .filter(|(l, _)| *l > 0.0)
        .collect();
    loads.sort_by(|a, b| b.0.total_cmp(&a.0));
    let touched = loads.len() as f64;
    let pairs = loads.iter().map(|(l, _)| l).sum();
    Some(RankLoad {
        touched,
        pairs,
        loads: Loads::PerExpert(loads),
    })
}

impl Routing {
    /// Experts one of `ep` ranks (holding `experts / ep` each) touches when `tokens` tokens
    /// each pick `top_k` of them, as `busiest_rank` takes it (`mean_touched`). Uniform picks
    /// (balanced, and the uniform reference of power-law routing): the expectation over
    /// ranks. Round robin: `min(experts, tokens × k)` distinct experts spread evenly over the
    /// ranks, so the busiest holds the share rounded up.
    pub fn touched_per_rank(self, experts: f64, top_k: f64, tokens: f64, ep: f64) -> f64 {
        let ep = ep.max(1.0);
        match self {
            Routing::RoundRobin => (experts.min(top_k * tokens).max(0.0) / ep).ceil(),
            Routing::RoundRobinGroupLimited {
                groups,
                topk_groups,
            } => match group_limited_loads(experts, top_k, tokens, ep, groups, topk_groups) {
                Some(load) => load.touched,
                None => Routing::RoundRobin.touched_per_rank(experts, top_k, tokens, ep),
            },
            Routing::Balanced | Routing::PowerLaw(_) => {
                expected_experts_touched(experts, top_k, tokens) / ep
            }
        }
    }
}

/// Expected distinct experts touched by `tokens` tokens, each routed to `top_k` of `experts`.
#[inline]
pub fn expected_experts_touched(experts: f64, top_k: f64, tokens: f64) -> f64 {
    if experts <= 0.0 || tokens <= 0.0 {
        return 0.0;
    }
    let miss = (1.0 - top_k / experts).clamp(0.0, 1.0);
    experts * (1.0 - miss.powf(tokens))
}

/// The same with skewed routing: expert `i` receives each token with probability `p[i]`
/// (Σ p = k): `Σ_i 1 − (1 − p_i)^B`.
pub fn expected_experts_touched_skewed(p: &[f64], tokens: f64) -> f64 {
    p.iter()
        .map(|pi| 1.0 - (1.0 - pi.clamp(0.0, 1.0)).powf(tokens))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift so the Monte-Carlo check needs no extra crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn monte_carlo(e: usize, k: usize, b: usize, trials: usize) -> f64 {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        let mut total = 0usize;
        let mut touched = vec![false; e];
        let mut chosen = Vec::with_capacity(k);
        for _ in 0..trials {
            touched.iter_mut().for_each(|t| *t = false);
            for _ in 0..b {
                chosen.clear();
                while chosen.len() < k {
                    let x = (rng.next() % e as u64) as usize;
                    if !chosen.contains(&x) {
                        chosen.push(x);
                    }
                }
                for &x in &chosen {
                    touched[x] = true;
                }
            }
            total += touched.iter().filter(|t| **t).count();
        }
        total as f64 / trials as f64
    }

    #[test]
    fn formula_matches_monte_carlo() {
        for &(e, k, b) in &[
            (384, 8, 1),
            (384, 8, 16),
            (384, 8, 128),
            (256, 8, 64),
            (8, 2, 3),
            (128, 4, 512),
        ] {
            let mc = monte_carlo(e, k, b, 4000);
            let f = expected_experts_touched(e as f64, k as f64, b as f64);
            assert!(
                (mc - f).abs() / f < 0.01,
                "E={e} k={k} B={b}: formula {f} vs Monte-Carlo {mc}"
            );
        }
    }

    #[test]
    fn grows_with_batch_and_saturates() {
        let mut last = 0.0;
        for b in [1.0, 2.0, 8.0, 64.0, 512.0, 4096.0] {
            let t = expected_experts_touched(384.0, 8.0, b);
            assert!(t >= last && t <= 384.0);
            last = t;
        }
        assert!((expected_experts_touched(384.0, 8.0, 1.0) - 8.0).abs() < 1e-9);
        assert!(last > 383.9);
    }

    #[test]
    fn skew_concentrates_the_busiest_rank() {
        for &(e, k, t, ep) in &[
            (256.0, 8.0, 4096.0, 8.0),
            (128.0, 8.0, 64.0, 1.0),
            (384.0, 8.0, 1024.0, 32.0),
        ] {
            let b = busiest_rank(
                e,
                k,
                t,
                ep,
                Routing::Balanced,
                expected_experts_touched(e, k, t) / ep,
                0.0,
            );
            let p = busiest_rank(e, k, t, ep, Routing::PowerLaw(1.2), 0.0, 0.0);
            // The busiest rank never computes less than its even share, and skew does not
            // touch more experts than uniform routing.
            assert!(p.pairs >= b.pairs - 1e-9, "{e} {k} {t} {ep}");
            assert!(p.touched <= b.touched + 1e-9);
            assert!(p.loads.max() >= b.loads.max());
            assert!(p.loads.max() <= t + 1e-9);
            let m = busiest_rank(e, k, t, ep, Routing::PowerLaw(1.01), 0.0, 0.0);
            assert!(m.pairs.is_finite() && m.pairs <= t * k + 1e-6);
        }
        assert_eq!(
            "power_law_1.2".parse::<Routing>(),
            Ok(Routing::PowerLaw(1.2))
        );
        assert_eq!("balanced".parse::<Routing>(), Ok(Routing::Balanced));
        assert!("power-law 0".parse::<Routing>().is_err());
    }

    #[test]
    fn skewed_routing_hands_out_whole_tokens() {
        // Far fewer pairs than experts: every share rounds to none, the pairs land one per
        // expert on tokens x k experts (as balanced routing places them), none gets two.
        for &(e, k, t) in &[(384.0, 8.0, 1.0), (384.0, 8.0, 8.0), (256.0, 8.0, 4.0)] {
            for a in [1.01, 1.2] {
                let p = busiest_rank(e, k, t, 1.0, Routing::PowerLaw(a), 0.0, 0.0);
                assert_eq!(p.touched, t * k, "E={e} k={k} t={t} a={a}");
                assert_eq!(p.loads.max(), 1.0);
                assert!((p.pairs - t * k).abs() < 1e-9);
            }
        }
        // Near experts / k tokens the light experts' shares round to none: skew touches
        // clearly fewer experts than balanced routing, and every load is a whole token.
        let bal = expected_experts_touched(384.0, 8.0, 48.0);
        for a in [1.01, 1.2] {
            let p = busiest_rank(384.0, 8.0, 48.0, 1.0, Routing::PowerLaw(a), 0.0, 0.0);
            assert!(p.touched < 0.85 * bal, "{} vs {bal}", p.touched);
            assert!(p.loads.iter().all(|(l, _)| l.fract() == 0.0));
            assert!((p.pairs - 384.0).abs() < 1e-9);
        }
    }

    /// Distinct experts on the busiest of `ep` ranks when `t` tokens' `k` picks are dealt
    /// over a stride of `E / k` (token i's j-th pick `(i + j·stride) mod E`, spread over the
    /// stride when fewer tokens than it).
    fn dealt_busiest(e: usize, k: usize, t: usize, ep: usize) -> usize {
        let stride = e.div_ceil(k);
        let mut hit = vec![false; e];
        for i in 0..t {
            for j in 0..k {
                let first = if t >= stride { i } else { i * stride / t };
                hit[(first + j * stride) % e] = true;
            }
        }
        hit.chunks(e / ep)
            .map(|r| r.iter().filter(|h| **h).count())
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn round_robin_deals_every_pick_to_a_new_expert_spread_over_the_ranks() {
        for &(e, k) in &[(256, 8), (128, 8), (384, 8), (32, 4), (160, 8)] {
            for t in [1, 2, 3, 4, 7, 16, 31, 48, 64, 100, 1000] {
                for ep in [1, 2, 4, 8, 16, 32] {
                    let (ef, kf, tf, epf) = (e as f64, k as f64, t as f64, ep as f64);
                    let rr = Routing::RoundRobin.touched_per_rank(ef, kf, tf, epf);
                    assert_eq!(rr, dealt_busiest(e, k, t, ep) as f64, "E={e} k={k} t={t}");
                    // Never fewer than uniform picks touch, never more than the rank holds.
                    let uniform = Routing::Balanced.touched_per_rank(ef, kf, tf, epf);
                    assert!(rr >= uniform - 1e-9 && rr <= ef / epf);
                }
            }
        }
        assert_eq!("round-robin".parse::<Routing>(), Ok(Routing::RoundRobin));
        assert_eq!(Routing::RoundRobin.to_string(), "round-robin");
    }

    /// Rank 0's per-expert loads, largest first, when `t` tokens' dealt picks
    /// (`dealt_picks`) pass a router that scores each group by its two best experts, keeps
    /// the `tg` best of `g` groups and then the `k` best experts in them, every tie going to
    /// the lower index (a stable sort), as a harness's one-hot logits meet it.
    fn grouped_brute_force(
        e: usize,
        k: usize,
        t: usize,
        ep: usize,
        g: usize,
        tg: usize,
    ) -> Vec<f64> {
        let (s, local) = (e / g, e / ep);
        let mut load = vec![0.0; e];
        for picks in dealt_picks(e, k, t) {
            let score: Vec<f64> = (0..e)
                .map(|x| f64::from(u8::from(picks.contains(&x))))
                .collect();
            let group_score = |gi: usize| {
                let mut v: Vec<f64> = score[gi * s..(gi + 1) * s].to_vec();
                v.sort_by(|a, b| b.total_cmp(a));
                v[0] + v[1]
            };
            let mut order: Vec<usize> = (0..g).collect();
            order.sort_by(|a, b| group_score(*b).total_cmp(&group_score(*a)));
            let mut cand: Vec<usize> = order[..tg]
                .iter()
                .flat_map(|gi| gi * s..(gi + 1) * s)
                .collect();
            cand.sort();
            cand.sort_by(|a, b| score[*b].total_cmp(&score[*a]));
            cand[..k].iter().for_each(|x| load[*x] += 1.0);
        }
        let mut mine: Vec<f64> = load[..local].iter().copied().filter(|l| *l > 0.0).collect();
        mine.sort_by(|a, b| b.total_cmp(a));
        mine
    }

    /// Each token's dealt picks (`dealt_busiest`'s deal).
    fn dealt_picks(e: usize, k: usize, t: usize) -> Vec<Vec<usize>> {
        let stride = e.div_ceil(k);
        (0..t)
            .map(|i| {
                let first = if t >= stride { i } else { i * stride / t };
                (0..k).map(|j| (first + j * stride) % e).collect()
            })
            .collect()
    }

    #[test]
    fn group_limited_deal_matches_a_router_that_breaks_ties_low() {
        let (e, k, g, tg) = (256, 8, 8, 4);
        for t in [1, 2, 5, 16, 31, 32, 33, 80, 384, 1024] {
            for ep in [1, 2, 8, 32, 128] {
                let r = Routing::RoundRobinGroupLimited {
                    groups: 8,
                    topk_groups: 4,
                };
                let got = busiest_rank(e as f64, k as f64, t as f64, ep as f64, r, 0.0, 0.0);
                let want = grouped_brute_force(e, k, t, ep, g, tg);
                let loads: Vec<f64> = got.loads.iter().map(|(l, _)| l).collect();
                assert_eq!(loads, want, "t={t} ep={ep}");
                assert_eq!(got.touched, want.len() as f64);
                assert_eq!(
                    r.touched_per_rank(e as f64, k as f64, t as f64, ep as f64),
                    got.touched
                );
            }
        }
        // At EP 1 the deal reaches only the first four groups: half the experts at most.
        let r = Routing::RoundRobinGroupLimited {
            groups: 8,
            topk_groups: 4,
        };
        assert_eq!(r.touched_per_rank(256.0, 8.0, 1000.0, 1.0), 128.0);
        // A deal that does not put one pick in each group (6 picks, 8 groups) falls back
        // to the plain deal.
        assert_eq!(
            r.touched_per_rank(256.0, 6.0, 16.0, 1.0),
            Routing::RoundRobin.touched_per_rank(256.0, 6.0, 16.0, 1.0)
        );
        assert_eq!("round-robin group-limited 8/4".parse::<Routing>(), Ok(r));
        assert_eq!(r.to_string().parse::<Routing>(), Ok(r));
        assert!("round-robin group-limited 4/8".parse::<Routing>().is_err());
    }

    #[test]
    fn uniform_skewed_equals_uniform() {
        let p = vec![8.0 / 384.0; 384];
        let a = expected_experts_touched_skewed(&p, 100.0);
        let b = expected_experts_touched(384.0, 8.0, 100.0);
        assert!((a - b).abs() < 1e-9);
    }
}
