//! How many distinct experts a batch touches.
//!
//! Decode cost of an MoE layer is the weight bytes of the experts the batch routes to. With E
//! experts, top-k routing and B tokens routed independently and uniformly, each expert is
//! missed by one token with probability (1 − k/E), so the expected number touched is
//! `E × (1 − (1 − k/E)^B)`: it grows with batch until every expert is read, then flattens.
//! (Sampling k distinct experts per token makes each expert's inclusion probability exactly
//! k/E, so the formula is exact in expectation for uniform routing.)

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
    fn uniform_skewed_equals_uniform() {
        let p = vec![8.0 / 384.0; 384];
        let a = expected_experts_touched_skewed(&p, 100.0);
        let b = expected_experts_touched(384.0, 8.0, 100.0);
        assert!((a - b).abs() < 1e-9);
    }
}
