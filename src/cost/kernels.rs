//! Dense GEMM, fused-MoE and decode-attention kernels as they run, not as ideal rooflines.
//!
//! Dense GEMM: the roofline at the generation's attained fractions per weight format, plus a
//! fixed time, after the activation-quantization pass of the formats that quantize
//! activations (FP8 per-tensor and block-scaled, NVFP4).
//!
//! Fused MoE: the busiest expert-parallel rank sets the time (`ops::routing::busiest_rank`).
//! Its touched experts' weights stream once at the kernel family's attained fraction of
//! DRAM bandwidth; its grouped GEMMs compute every expert's rows padded to the kernel's row
//! tile (and the expert width padded to 64 columns), at the family's attained fraction of
//! the math dtype's peak; the slower of the two runs, after the family's floor. On top, the
//! elementwise passes over the token-expert pairs (activation, sum, zero-fill), over all of a
//! token's pairs for kernels that size buffers by them (vLLM's Triton path with an expert
//! map), else over the rank's own, and the passes of routing and permutation kernels that
//! walk every token's pairs whatever the expert map. The constants are the kernel library's
//! the call names (a measured row's `kernel`), else the generation's default for the format.
//!
//! Decode attention: one work item per (sequence, KV head) (per query head under a sliding
//! window for kernels that pack a KV head's query heads only without one, and on every
//! unpacked call of kernels that split only their packed path), each split over the KV
//! length up to the kernel's split limit and what fills one wave of SMs. Each CTA streams its
//! share of the item's cache at most at one SM's load bandwidth, so a call of few items and
//! splits cannot pull the whole GPU's bandwidth; the whole call streams at most at the
//! kernel's attained DRAM rate. Each item also pays a fixed time (page-table walk, softmax
//! merge, output), spread over the SMs. Sliding windows cap the span before this.
//! The constants are the library's the call names (a measured row's `kernel`), else the
//! generation's default kernel.
//!
//! MLA latent decode attention: one CTA per (sequence, tile of query heads), so the heads are
//! padded to the tile for the math and every tile streams the sequence's latent cache; the
//! slower of the two, plus a fixed time per (query, head) row spread over the SMs.
//!
//! Constants are per generation (`cost::generation`, `configs/kernels/`).

use crate::cost::device::{Device, Harness};
use crate::cost::generation::{AttentionBackend, MoeBackend};
use crate::ops::routing::{busiest_rank, Routing};
use crate::spec::{FormatKind, KvDtype, WeightFormat};

/// Smallest power-of-two row tile from 16 up to `tile_m` that holds `rows`, and the padded
/// rows.
fn padded_rows(rows: f64, tile_m: u32) -> f64 {
    let mut b = 16.0_f64;
    while b < rows && b < tile_m as f64 {
        b *= 2.0;
    }
    (rows / b).ceil() * b
}

/// The block height vLLM's Marlin MoE picks for a mean of `mean` rows per local expert: the
/// first of 8, 16, 32, 48 with `mean / block < 0.9`, else 64.
fn mean_load_block(mean: f64) -> f64 {
    [8.0, 16.0, 32.0, 48.0]
        .into_iter()
        .find(|b| mean / b < 0.9)
        .unwrap_or(64.0)
}

/// The fused-MoE call's shape, as `Op::MoeGemm` carries it.
#[derive(Debug, Clone, Copy)]
pub struct MoeShape {
    /// The call is handed every token of `tokens` (an expert map drops other ranks'
    /// pairs), not only the pairs routed to its experts (an all-to-all dispatch).
    pub handed_all: bool,
    pub experts: f64,
    pub ep: f64,
    pub tokens: f64,
    pub top_k: f64,
    pub routing: Routing,
    /// Experts uniform routing touches per rank (the operator's `touched_experts`).
    pub mean_touched: f64,
    /// EPLB's redundant expert slots per rank.
    pub redundant: f64,
    /// Weight matrices per expert: 3 gated (gate and up fused, down), 2 ungated (up, down),
    /// each `hidden × width`.
    pub matrices: f64,
    pub hidden: f64,
    pub width: f64,
    pub weights: WeightFormat,
    /// Weights read as BF16 after a separate cast pass.
    pub cast: bool,
    /// The MoE library named for the call (`None`: the generation's default).
    pub backend: Option<MoeBackend>,
}

impl MoeShape {
    /// Weight elements of one expert on this GPU.
    pub fn expert_elems(&self) -> f64 {
        crate::ops::moe::expert_elems(self.matrices, self.hidden, self.width)
    }
}

/// (flops, bytes, kernel time) of one fused-MoE call on `dev`'s busiest rank.
pub fn moe_time(s: &MoeShape, dev: &Device) -> (f64, f64, f64, bool) {
    let load = busiest_rank(
        s.experts,
        s.top_k,
        s.tokens,
        s.ep,
        s.routing,
        s.mean_touched,
        s.redundant,
    );
    let (bpw, kind) = if s.cast {
        (2.0, FormatKind::Bf16)
    } else {
        (s.weights.bytes_per_weight(), s.weights.kind)
    };
    let expert_elems = s.expert_elems();
    let weight_bytes = load.touched * expert_elems * bpw;
    let flops = 2.0 * load.pairs * expert_elems;
    // Per pair: the input and output rows, the first GEMM's output (gate and up: 2 widths;
    // up: 1) and the activation's (1 width).
    let act_bytes = load.pairs * (2.0 * s.hidden + s.matrices * s.width) * 2.0;
    let peak_bw = dev.system.gpu.memory_bandwidth.0;
    // A harness repeating the call on the same weights finds them in L2 when they fit: at
    // the speed of light they then cost no DRAM time, but still cross L2, at most at its
    // bandwidth; weights beyond L2 keep what L2 holds of them ([`Device::sol_stream`], as a
    // repeated attention call's speed of light; validate only).
    let warm = dev.warm_in_l2(weight_bytes);
    if dev.params.is_sol() {
        let tm = dev.sol_stream(weight_bytes) + act_bytes / peak_bw;
        let tc = flops / dev.gemm_peak[kind];
        return (flops, weight_bytes + act_bytes, tm.max(tc), tc > tm);
    }
    let k = dev.moe_kernel_on(s.weights, s.backend);
    // The first GEMM's output (gate and up: 2 widths; up: 1) padded to whole 64-wide tiles.
    let first = (s.matrices - 1.0).max(1.0);
    let wide = (first * s.width / 64.0).ceil() * 64.0 / first;
    // Rows an expert with `l` pairs computes: padded to the library's block.
    // The pairs the call is handed: every token's (an expert map drops the other ranks'),
    // or, after an all-to-all dispatch, only those routed to this rank's experts.
    let handed = if s.handed_all {
        s.tokens * s.top_k
    } else {
        load.pairs
    };
    let block = k
        .block_from_mean_load
        .then(|| mean_load_block(handed / (s.experts / s.ep + s.redundant).max(1.0)));
    let padded = |l: f64| match block {
        // The MMA fragments are 16 rows high: a shorter block computes as 16.
        Some(b) => (l / b).ceil() * b.max(16.0),
        None => padded_rows(l, k.tile_m),
    };
    let rows: f64 = load.loads.iter().map(|(l, n)| n * padded(l)).sum();
    let tc = 2.0 * s.matrices * s.hidden * wide * rows
        / (Device::attained(k.compute_fraction, dev.gemm_eff[kind]) * dev.gemm_peak[kind]);
    let speedup = if warm { k.harness_warm_l2_speedup } else { 1.0 };
    let tm = weight_bytes / (Device::attained(k.memory_fraction, dev.mem_eff) * peak_bw * speedup);
    let pairs = match k.pairs {
        crate::cost::generation::PairScope::All => handed,
        crate::cost::generation::PairScope::Local => load.pairs,
    };
    let pair_bytes =
        (k.pair_passes * pairs + k.all_pair_passes * handed) * (s.hidden + s.width) * 2.0;
    // An expert map (expert parallelism) adds its remapping kernels.
    let map_fixed = if s.ep > 1.0 {
        k.expert_map_fixed.0
    } else {
        0.0
    };
    let t =
        k.floor.0 + map_fixed + k.per_expert.0 * load.touched + tm.max(tc) + pair_bytes / peak_bw;
    (flops, weight_bytes + pair_bytes, t, tc > tm)
}

/// (kernel time, compute-bound) of a dense GEMM `[m,k] x [k,n]` on weights stored as `w`
/// (read as BF16 after a cast pass when `cast`), as the generation's kernel for the format
/// runs it: an activation-quantization pass where the format has one (BF16 activations read,
/// quantized ones written, at the kernel's memory fraction), then the roofline of the GEMM at
/// its attained compute and memory fractions, plus the kernel's fixed time. The weights are
/// read once, the activations (quantized where quantized) once and the BF16 output written
/// once. W4A16 formats compute in BF16 (`Device::gemm_math`): memory-bound on the 4-bit
/// weights at small M, BF16 compute at large M.
///
/// A kernel with a `tile` runs on a grid: `tiles = ceil(m / tile_m) * ceil(n / tile_n)`
/// CTAs, k split into `split = clamp(SMs / tiles, 1, max_split_k)` slices, `waves =
/// ceil(tiles / SMs)` (one when split). Its math is then `waves` times one (padded) tile's
/// `2 tile_m tile_n k / split` at one SM's share of the attained rate, and each CTA loads its
/// operands at `sm_load_bandwidth`; the time is the largest of those and the DRAM stream. So
/// a grid of fewer CTAs than SMs that walks all of k (no split-K) cannot use the whole GPU's
/// math or bandwidth. The quantization pass takes at least `ceil(m / SMs)` waves of
/// `quantize_row_wave` (one CTA per row), and moves its bytes at no more than
/// `quantize_sm_bandwidth` per SM (a pass of latency-bound loads).
pub fn gemm_time(dev: &Device, m: f64, n: f64, k: f64, w: WeightFormat, cast: bool) -> (f64, bool) {
    let (bpw, kernel_w) = if cast {
        (2.0, WeightFormat::BF16)
    } else {
        (w.bytes_per_weight(), w)
    };
    let g = dev.gemm_kernel(kernel_w).0;
    let t = gemm_time_on(dev, (m, n, k), kernel_w, bpw, cast, g.tile_for(m));
    // A dispatch that switches to a larger tile above some m may run that m faster than the
    // last m of the step below; more rows are never cheaper than those steps' last rows.
    let mut worst = t.0;
    for step in &g.tile_by_m {
        if let Some(max_m) = step.max_m.map(f64::from).filter(|&x| x < m) {
            let below = gemm_time_on(dev, (max_m, n, k), kernel_w, bpw, cast, Some(step.tile));
            worst = worst.max(below.0);
        }
    }
    (worst, t.1)
}

/// [`gemm_time`] on one given tile (`None`: the plain roofline), before the tile ladder's
/// not-below rule: `kernel_w` is the format whose kernel runs, `bpw` the bytes per weight
/// it reads.
fn gemm_time_on(
    dev: &Device,
    (m, n, k): (f64, f64, f64),
    kernel_w: WeightFormat,
    bpw: f64,
    cast: bool,
    tile: Option<[u32; 2]>,
) -> (f64, bool) {
    let (g, bw, rate) = dev.gemm_kernel(kernel_w);
    let sms = dev.sm_count.max(1.0);
    let (act, quantize) = if g.quantize_activations && !cast {
        let rows = (m / sms).ceil() * g.quantize_row_wave.0;
        let bytes = m * k * (2.0 + bpw);
        let per_sm = g.quantize_sm_bandwidth.map_or(0.0, |b| bytes / (sms * b.0));
        // A harness repeating the call on one set of activations reads them from L2 when
        // they fit there (validate only; the weights' copies do not evict what the pass reads
        // between its repeats, as they stream once per call).
        let pass_bw = if dev.warm_in_l2(bytes) {
            bw * g.harness_warm_l2_speedup.max(1.0)
        } else {
            bw
        };
        (bpw, (bytes / pass_bw).max(rows).max(per_sm))
    } else {
        (2.0, 0.0)
    };
    // The epilogue may store the output slower than the main loop reads its operands.
    let out_bw = g
        .output_memory_fraction
        .map_or(bw, |f| bw / g.memory_fraction * f);
    let mut tm = (n * k * bpw + m * k * act) / bw + m * n * 2.0 / out_bw;
    // A benchmark harness repeating a call whose tensors all fit in L2 (validate only).
    let copies = if dev.harness == Harness::CyclesWeightCopies {
        g.harness_weight_copies
    } else {
        1.0
    };
    if gemm_warm(dev, m, n, k, bpw * copies, act) {
        tm /= g.harness_warm_l2_speedup.max(1.0);
    }
    let (tc, tcta) = match tile {
        Some([tile_m, tile_n]) => {
            // Output tiles over the SMs; k split only where the library splits it and the
            // tiles leave SMs idle. Each CTA computes its whole (padded) tile at one SM's
            // share of the rate and loads its operands at one SM's load bandwidth, wave
            // after wave. A library that picks the tile height from m pads m only to the
            // next power of two within [min_tile_m, tile_m].
            let tile_m = tile_m.max(1) as f64;
            let tile_m = g.min_tile_m.map_or(tile_m, |lo| {
                let p2 = 2f64.powf(m.max(1.0).log2().ceil());
                p2.clamp((lo.max(1) as f64).min(tile_m), tile_m)
            });
            let tile_n = tile_n.max(1) as f64;
            let tiles = (m / tile_m).ceil() * (n / tile_n).ceil();
            let depth = g
                .split_k_block
                .map_or(f64::INFINITY, |b| k / b.max(1) as f64);
            let split = (sms / tiles)
                .min(depth)
                .clamp(1.0, g.max_split_k.max(1) as f64);
            // A split grid fills at most one wave (split <= SMs / tiles).
            let waves = if split > 1.0 {
                1.0
            } else {
                (tiles / sms).ceil()
            };
            let k_cta = k / split;
            let cta_rate = g
                .cta_compute_fraction
                .map_or(rate, |f| rate / g.compute_fraction * f);
            let tc = (waves * 2.0 * tile_m * tile_n * k_cta / (cta_rate / sms))
                .max(2.0 * m * n * k / rate);
            let tcta = g.sm_load_bandwidth.map_or(0.0, |b| {
                waves * (n.min(tile_n) * bpw + m.min(tile_m) * act) * k_cta / b.0
            });
            (tc, tcta)
        }
        None => (2.0 * m * n * k / rate, 0.0),
    };
    let t = tc.max(tm).max(tcta);
    (g.fixed.0 + quantize + t, tc > tm.max(tcta))
}

/// Whether a GEMM call's weights, activations and output all fit in L2 in a benchmark
/// harness that repeats it (`Device::harness`): validate only, predictions never run one.
/// `bpw` counts every copy of the weights the harness cycles through.
pub fn gemm_warm(dev: &Device, m: f64, n: f64, k: f64, bpw: f64, act: f64) -> bool {
    dev.warm_in_l2(n * k * bpw + m * k * act + m * n * 2.0)
}

/// The work of one decode attention call, as `Op::Attention` carries it.
#[derive(Debug, Clone, Copy)]
pub struct DecodeShape {
    pub sequences: f64,
    /// KV heads on this GPU.
    pub kv_heads: f64,
    /// Query heads on this GPU.
    pub heads: f64,
    /// Run with a sliding window (whatever its length).
    pub windowed: bool,
    /// Mean positions each query attends to.
    pub span: f64,
    /// Element type of the cache.
    pub kv_dtype: KvDtype,
}

/// Kernel time of a decode attention call of shape `s` streaming `kv_bytes` of cache (plus
/// `other_bytes` of queries and outputs), as the library `backend` names (`None`: the
/// generation's default) runs it, or `None` at the speed of light.
///
/// One work item per (sequence, KV head), each streaming that KV head's cache
/// (`kv_bytes / (sequences × kv_heads)`); per (sequence, query head) for a windowed call of a
/// kernel that packs query heads only without a window (`windowed_per_query_head`), and for
/// any unpacked call of a kernel that splits only its packed path (`splits_only_packed`,
/// which then runs them unsplit): every query head's item re-reads its KV head's cache.
/// An item's KV is split into `splits = clamp(min(span / split_block, max_splits,
/// SMs / items), 1)` CTAs (the libraries' heuristics fill one wave, not more), and
///
/// `t = floor + max(waves · max(item_kv / splits, tile) / b_sm, items · item_kv / (η_m · B))
///      + other / (η_m · B) + per_item · items / SMs`
///
/// with `waves = ceil(items · splits / SMs)`, each CTA's share at least one whole tile
/// (`min_block` positions of a 16-bit cache, the same bytes of any other), and `b_sm` the
/// rate one CTA streams at
/// (`sm_load_bandwidth`): a call of few items cannot pull the whole GPU's bandwidth, and
/// more SMs or more bandwidth never slow it. In a benchmark harness that repeats the call
/// (`Device::warm_l2`), a cache that fits in L2 streams `harness_warm_l2_speedup` times
/// faster than DRAM (the per-CTA rate is the SM's, wherever the data sits). A CTA
/// consumes an FP8 cache at `fp8_kv_load_rate` of `b_sm` (the DRAM stream is unchanged),
/// and the call is preceded by the query's FP8 quantization (`fp8_query_quant`).
///
/// The split count is the mean over contexts (`span / split_block`, not rounded up): a
/// rounded count makes time fall just past each split boundary, and a longer context never
/// decodes faster. Splits divide the cache stream only; every split reads its queries.
pub fn decode_attention_time(
    dev: &Device,
    s: &DecodeShape,
    backend: Option<AttentionBackend>,
    kv_bytes: f64,
    other_bytes: f64,
) -> Option<f64> {
    if dev.params.is_sol() || s.sequences <= 0.0 || s.kv_heads <= 0.0 {
        return None;
    }
    let k = dev.decode_attention_on(backend);
    let sms = dev.sm_count.max(1.0);
    let packed = !s.windowed && s.heads > s.kv_heads;
    let per_query_head =
        (s.windowed && k.windowed_per_query_head) || (k.splits_only_packed && !packed);
    let per_item_heads = if per_query_head {
        s.heads.max(s.kv_heads)
    } else {
        s.kv_heads
    };
    let items = s.sequences * per_item_heads;
    let splits = if k.splits_only_packed && !packed {
        1.0
    } else {
        (s.span / k.split_block as f64)
            .min(k.max_splits as f64)
            .min(sms / items)
            .max(1.0)
    };
    let waves = (items * splits / sms * (1.0 - 1e-12)).ceil().max(1.0);
    let item_kv = kv_bytes / (s.sequences * s.kv_heads);
    let bw = Device::attained(k.memory_fraction, dev.mem_eff) * dev.system.gpu.memory_bandwidth.0;
    let kv_bw = if dev.warm_in_l2(kv_bytes) {
        bw * k.harness_warm_l2_speedup
    } else {
        bw
    };
    let b_sm = match s.kv_dtype {
        KvDtype::Fp8 => k.sm_load_bandwidth.0 * k.fp8_kv_load_rate,
        _ => k.sm_load_bandwidth.0,
    };
    // A CTA's pass covers at least one tile: `min_block` positions of a 16-bit cache, the
    // same bytes of any other.
    let tile = if s.span > 0.0 {
        item_kv / s.span * k.min_block as f64 * 2.0 / s.kv_dtype.bytes()
    } else {
        0.0
    };
    let per_cta = waves * (item_kv / splits).max(tile) / b_sm;
    // Per-query-head items re-read their KV head's cache; the re-reads come from L2 when
    // the cache of that head over the whole batch (what runs between two query heads of one
    // KV head, launched batch-major) fits in it, from DRAM otherwise.
    let l2 = dev.system.gpu.l2_cache.map_or(0.0, |b| b.0);
    let dram_reads = if per_query_head && s.sequences * item_kv <= l2 {
        s.sequences * s.kv_heads * item_kv
    } else {
        items * item_kv
    };
    let stream = per_cta.max(dram_reads / kv_bw) + other_bytes / bw;
    let quantize = match s.kv_dtype {
        KvDtype::Fp8 => k.fp8_query_quant.0,
        _ => 0.0,
    };
    Some(k.floor.0 + quantize + stream + k.per_item.0 * items / sms)
}

/// The work of one MLA latent decode call (absorbed form), as `Op::Attention` carries it.
#[derive(Debug, Clone, Copy)]
pub struct MlaDecodeShape {
    pub sequences: f64,
    /// Query rows per head: a sequence's decode token, or its verified drafts too.
    pub queries: f64,
    /// Query heads on this GPU.
    pub heads: f64,
    /// Score and value products.
    pub flops: f64,
    /// Element type of the latent cache.
    pub kv_dtype: KvDtype,
}

/// Kernel time of an MLA latent decode call of shape `s` streaming `kv_bytes` of latent
/// cache (plus `other_bytes` of queries and outputs), or `None` at the speed of light.
///
/// `t = max(flops · ⌈h/T⌉T/h / (η_c · P), R · kv / (η_m · B) + other / (η_m · B), grid)
///      + per_row · queries · h / SMs`, with `T` the kernel's head tile, `P` the BF16 peak
/// (the FP8 one for an FP8 cache where the kernel multiplies FP8), `R` the head tiles where
/// each rereads the cache from DRAM (else 1), and `grid` the per-CTA stream of one item per
/// (sequence, head tile), split while items leave SMs idle (where the kernel has one).
pub fn mla_decode_time(
    dev: &Device,
    s: &MlaDecodeShape,
    kv_bytes: f64,
    other_bytes: f64,
) -> Option<f64> {
    let MlaDecodeShape {
        sequences,
        queries,
        heads,
        flops,
        kv_dtype,
    } = *s;
    if dev.params.is_sol() || queries <= 0.0 || heads <= 0.0 {
        return None;
    }
    let k = &dev.kernels.mla_decode;
    let tile = k.head_tile as f64;
    let tiles = (heads / tile).ceil();
    let peak = if k.fp8_kv_math {
        dev.attention_peak(kv_dtype)
    } else {
        dev.bf16_peak
    };
    let rate = Device::attained(
        k.compute_fraction,
        (dev.params.attention_efficiency, dev.attention_prior),
    ) * peak;
    let bw = Device::attained(k.memory_fraction, dev.mem_eff) * dev.system.gpu.memory_bandwidth.0;
    let tc = flops * tiles * tile / heads / rate;
    let rereads = if k.tiles_reread_dram { tiles } else { 1.0 };
    let tm = (rereads * kv_bytes + other_bytes) / bw;
    // On a grid: one item per (sequence, head tile), split over CTAs while items leave SMs
    // idle; each CTA streams its slice at one SM's load rate, waves after waves.
    let tcta = k.sm_load_bandwidth.map_or(0.0, |b| {
        let sms = dev.sm_count.max(1.0);
        let seqs = sequences.max(1.0);
        let items = seqs * tiles;
        let splits = (sms / items).floor().clamp(1.0, k.max_splits.max(1) as f64);
        let waves = (items * splits / (sms * k.ctas_per_sm.max(1) as f64)).ceil();
        waves * kv_bytes / seqs / splits / b.0
    });
    Some(tc.max(tm).max(tcta) + k.per_row.0 * queries * heads / dev.sm_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm_shapes() -> Vec<(f64, f64, f64)> {
        let dims = [1.0, 12.0, 64.0, 65.0, 129.0, 1000.0, 8192.0];
        let ks = [32.0, 1024.0, 65536.0];
        let mut v = vec![];
        for &m in &dims {
            for &n in &dims {
                for &k in &ks {
                    v.push((m, n, k));
                }
            }
        }
        v
    }

    #[test]
    fn gemm_time_is_monotone_in_m_n_and_k() {
        for sys in [h100(), b200()] {
            let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
            for fmt in ["bf16", "fp8", "fp8-block128", "nvfp4"] {
                let w: WeightFormat = fmt.parse().unwrap();
                let t = |m: f64, n: f64, k: f64| gemm_time(&dev, m, n, k, w, false).0;
                for (m, n, k) in gemm_shapes() {
                    let base = t(m, n, k) * (1.0 - 1e-12);
                    for (dm, dn, dk) in [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)] {
                        for step in [1.0, 63.0, 64.0, 1000.0] {
                            let up = t(m + dm * step, n + dn * step, k + dk * step);
                            assert!(up >= base, "{fmt} {m}x{n}x{k} +{step}: {up} < {base}");
                        }
                    }
                }
            }
        }
    }

    /// The GEMM harness cycles through `harness_weight_copies` copies of the weights (7 on
    /// Ada): a BF16 call whose 16.8 MB of weights fit in L40S's 96 MB L2 once but not seven
    /// times runs warm for a harness that repeats one set and at DRAM speed for the GEMM
    /// harness; one whose 10.5 MB fit seven times runs warm for both.
    #[test]
    fn gemm_harness_weight_copies_decide_which_calls_run_warm() {
        let sys = l40s();
        let (cold, one_set) = cold_and_warm(&sys);
        let mut copies = one_set.clone();
        copies.harness = Harness::CyclesWeightCopies;
        let (g, _, _) = cold.gemm_kernel(WeightFormat::BF16);
        assert!(g.harness_weight_copies > 1.0 && g.harness_warm_l2_speedup > 1.0);
        let t = |d: &Device, m, n, k| gemm_time(d, m, n, k, WeightFormat::BF16, false).0;
        let (m, n, k) = (16.0, 4096.0, 2048.0);
        assert!(t(&one_set, m, n, k) < t(&cold, m, n, k));
        assert_eq!(t(&copies, m, n, k), t(&cold, m, n, k));
        let (m, n, k) = (12.0, 10240.0, 512.0);
        assert!(t(&copies, m, n, k) < t(&cold, m, n, k));
        assert_eq!(t(&copies, m, n, k), t(&one_set, m, n, k));
        // Predictions never set either flag.
        assert_eq!(cold.harness, Harness::None);
    }

    #[test]
    fn gemm_warm_l2_only_speeds_calls_that_fit_and_never_changes_predictions() {
        for sys in [h100(), b200()] {
            let (cold, warm) = cold_and_warm(&sys);
            assert_eq!(cold.harness, Harness::None);
            for fmt in ["bf16", "fp8", "fp8-block128"] {
                let w: WeightFormat = fmt.parse().unwrap();
                for (m, n, k) in gemm_shapes() {
                    let (tc, tw) = (
                        gemm_time(&cold, m, n, k, w, false).0,
                        gemm_time(&warm, m, n, k, w, false).0,
                    );
                    assert!(tw <= tc * (1.0 + 1e-12), "{fmt} {m}x{n}x{k}");
                    let bpw = w.bytes_per_weight();
                    if !gemm_warm(&warm, m, n, k, bpw, 2.0) && !gemm_warm(&warm, m, n, k, bpw, bpw)
                    {
                        assert_eq!(tw, tc, "{fmt} {m}x{n}x{k}: too big for L2");
                    }
                }
            }
            // 16k x 16k BF16 weights (512 MB) never fit.
            assert!(!gemm_warm(&warm, 1.0, 16384.0, 16384.0, 2.0, 2.0));
        }
    }

    #[test]
    fn gemm_time_never_under_its_roofline() {
        for sys in [h100(), b200()] {
            let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
            for fmt in ["bf16", "fp8", "fp8-block128"] {
                let w: WeightFormat = fmt.parse().unwrap();
                let (g, bw, rate) = dev.gemm_kernel(w);
                let bpw = w.bytes_per_weight();
                for (m, n, k) in gemm_shapes() {
                    let act = if g.quantize_activations { bpw } else { 2.0 };
                    let roof = (2.0 * m * n * k / rate)
                        .max((n * k * bpw + m * k * act + m * n * 2.0) / bw);
                    let t = gemm_time(&dev, m, n, k, w, false).0;
                    assert!(t >= g.fixed.0 + roof * (1.0 - 1e-12), "{fmt} {m}x{n}x{k}");
                }
            }
        }
    }

    #[test]
    fn gemm_more_sms_of_the_same_kind_never_slower() {
        // More SMs at the same per-SM rate (the peak grows with them), same DRAM.
        for sys in [h100(), b200()] {
            let mut more = sys.clone();
            more.gpu.sm_count = sys.gpu.sm_count.map(|n| n * 2);
            let p = &mut more.gpu.dense_peak;
            for r in [&mut p.bf16, &mut p.fp8, &mut p.fp4, &mut p.int8] {
                if let Some(f) = r.as_mut() {
                    f.0 *= 2.0;
                }
            }
            let params = crate::cost::CostParams::default_for(&sys);
            let (a, b) = (
                Device::new(&sys, params).unwrap(),
                Device::new(&more, params).unwrap(),
            );
            for fmt in ["bf16", "fp8", "fp8-block128"] {
                let w: WeightFormat = fmt.parse().unwrap();
                for (m, n, k) in gemm_shapes() {
                    let (ta, tb) = (
                        gemm_time(&a, m, n, k, w, false).0,
                        gemm_time(&b, m, n, k, w, false).0,
                    );
                    assert!(tb <= ta * (1.0 + 1e-12), "{fmt} {m}x{n}x{k}: {tb} > {ta}");
                }
            }
        }
    }

    #[test]
    fn gemm_without_split_k_walks_k_on_few_sms() {
        // H100 FP8 per-tensor (CUTLASS, no split-K): 12 x 32 x 51200 is one 64 x 64 tile, so
        // one SM walks all of k; measured 42 us, far over the whole-GPU roofline (~1 us).
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let w: WeightFormat = "fp8".parse().unwrap();
        let one_cta = gemm_time(&dev, 12.0, 32.0, 51200.0, w, false).0;
        assert!(one_cta > 20e-6 && one_cta < 60e-6, "{one_cta}");
        // 132 tiles' worth of n fill the GPU in one wave: 132 times the work, a few times the
        // time (the DRAM stream of 0.4 GB of weights then bounds it).
        let full = gemm_time(&dev, 12.0, 64.0 * 132.0, 51200.0, w, false).0;
        assert!(full < 5.0 * one_cta, "{full} vs {one_cta}");
    }

    #[test]
    fn fp8_quantization_runs_at_its_per_sm_rate_not_the_dram_rate() {
        // H100 FP8 per-tensor, 32768 x 64 x 5120: 168 M activation elements to quantize, a
        // small GEMM after them. Measured 561 us; the pass at the DRAM rate alone would be
        // ~0.2 ms, at 132 SMs x 8 GB/s over its 3 bytes per element ~0.48 ms.
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let w: WeightFormat = "fp8".parse().unwrap();
        let (g, bw, _) = dev.gemm_kernel(w);
        let per_sm = g
            .quantize_sm_bandwidth
            .expect("Hopper's fp8 pass has a per-SM rate");
        let (m, n, k) = (32768.0, 64.0, 5120.0);
        let t = gemm_time(&dev, m, n, k, w, false).0;
        let pass = m * k * 3.0 / (dev.sm_count * per_sm.0);
        assert!(pass > 2.0 * m * k * 3.0 / bw, "the per-SM rate binds here");
        assert!(t >= pass && t > 450e-6 && t < 700e-6, "{t}");
        // Twice the SMs halve the pass (the DRAM stream does not bind it).
        let mut more = sys.clone();
        more.gpu.sm_count = sys.gpu.sm_count.map(|s| s * 2);
        let dev2 = Device::new(&more, crate::cost::CostParams::default_for(&more)).unwrap();
        let t2 = gemm_time(&dev2, m, n, k, w, false).0;
        assert!(t2 < 0.6 * t, "{t2} vs {t}");
        // A decode-sized call barely quantizes anything: the rate changes nothing there.
        let small = gemm_time(&dev, 8.0, 8192.0, 8192.0, w, false).0;
        let small_pass = 8.0 * 8192.0 * 3.0 / (dev.sm_count * per_sm.0);
        assert!(small_pass < 0.05 * small, "{small_pass} vs {small}");
    }

    /// vLLM's SM120 FP8 dispatch picks the whole tile from m (16 x 64 up to m = 16, 32 x 64
    /// up to 32, 64 x 64 up to 256, 128 x 128 beyond): the ladder's steps are read as written,
    /// and a larger m never costs less than a smaller one across a step.
    #[test]
    fn a_tile_ladder_picks_the_tile_by_m_and_more_rows_never_cost_less() {
        let sys = crate::spec::System::load("8x-rtx-pro-6000-server-pcie").unwrap();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let w: WeightFormat = "fp8".parse().unwrap();
        let (g, _, _) = dev.gemm_kernel(w);
        assert_eq!(g.tile_for(16.0), Some([16, 64]));
        assert_eq!(g.tile_for(17.0), Some([32, 64]));
        assert_eq!(g.tile_for(256.0), Some([64, 64]));
        assert_eq!(g.tile_for(257.0), Some([128, 128]));
        for (n, k) in [(64.0, 65536.0), (4096.0, 4096.0), (51200.0, 512.0)] {
            let mut last = 0.0;
            for m in (1..=600).map(f64::from) {
                let t = gemm_time(&dev, m, n, k, w, false).0;
                assert!(t >= last * (1.0 - 1e-12), "n={n} k={k} m={m}: {t} < {last}");
                last = t;
            }
        }
    }

    /// SM120's FlashInfer NVFP4 GEMM runs one 128 x 128 tile per CTA without split-K: a call
    /// of one tile walks all of k on one SM (the Server table: m=7 n=32 k=12288 in 47.8 us,
    /// m=112 n=64 k=16384 in 62.2 us), far over what the whole GPU's rate would give.
    #[test]
    fn sm120_nvfp4_walks_k_on_one_sm_per_tile() {
        let sys = crate::spec::System::load("8x-rtx-pro-6000-server-pcie").unwrap();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let w: WeightFormat = "nvfp4".parse().unwrap();
        for (m, n, k, measured) in [
            (7.0, 32.0, 12288.0, 47.8e-6),
            (112.0, 64.0, 16384.0, 62.2e-6),
        ] {
            let t = gemm_time(&dev, m, n, k, w, false).0 + dev.params.kernel_gap;
            assert!(
                (t / measured - 1.0).abs() < 0.15,
                "{m}x{n}x{k}: {t} vs {measured}"
            );
        }
    }

    #[test]
    fn padding_rounds_up_to_the_tile() {
        assert_eq!(padded_rows(1.0, 128), 16.0);
        assert_eq!(padded_rows(20.0, 128), 32.0);
        assert_eq!(padded_rows(200.0, 64), 256.0);
        assert_eq!(padded_rows(64.0, 16), 64.0);
    }

    fn b200() -> crate::spec::System {
        crate::spec::System::load("8x-b200-nvlink").unwrap()
    }

    /// A DeepSeek-V3-like MoE call (256 experts, top 8, 7168 -> 2048) on `ep` ranks.
    fn moe(
        tokens: f64,
        ep: f64,
        routing: Routing,
        fmt: &str,
        backend: Option<MoeBackend>,
    ) -> MoeShape {
        let (experts, top_k) = (256.0, 8.0);
        let touched = crate::ops::routing::expected_experts_touched(experts, top_k, tokens) / ep;
        MoeShape {
            handed_all: true,
            experts,
            ep,
            tokens,
            top_k,
            routing,
            mean_touched: touched.min(experts / ep),
            redundant: 0.0,
            matrices: 3.0,
            hidden: 7168.0,
            width: 2048.0,
            weights: fmt.parse().unwrap(),
            cast: false,
            backend,
        }
    }

    #[test]
    fn moe_time_respects_its_floor_and_grows_with_tokens_under_any_routing() {
        let sys = b200();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        for fmt in ["bf16", "fp8", "nvfp4", "mxfp4", "int4-g128"] {
            for backend in [None, Some(MoeBackend::Cutlass), Some(MoeBackend::Marlin)] {
                for ep in [1.0, 8.0, 64.0] {
                    let floor = dev.moe_kernel_on(fmt.parse().unwrap(), backend).floor.0;
                    let mut last = 0.0;
                    for tokens in [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0] {
                        let bal =
                            moe_time(&moe(tokens, ep, Routing::Balanced, fmt, backend), &dev).2;
                        let skew =
                            moe_time(&moe(tokens, ep, Routing::PowerLaw(1.2), fmt, backend), &dev)
                                .2;
                        assert!(
                            bal.min(skew) >= floor,
                            "{fmt} {backend:?} ep {ep} t {tokens}: under the floor"
                        );
                        assert!(
                            bal >= last,
                            "{fmt} {backend:?} ep {ep}: {tokens} tokens faster"
                        );
                        last = bal;
                    }
                }
            }
        }
    }

    #[test]
    fn an_expert_map_adds_its_fixed_time_only_under_expert_parallelism() {
        let sys = crate::spec::System::load("8x-h100-nvlink").unwrap();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let k = dev.moe_kernel_on("mxfp4".parse().unwrap(), None);
        assert!(k.expert_map_fixed.0 > 0.0);
        for tokens in [512.0, 4096.0] {
            // One rank of ep 8 (32 of 256 experts, 8x the tokens) against a call on 32
            // experts without a map: both touch all 32 with the same pairs, so the same local
            // work; the mapped call adds the map's fixed time (and its passes over the whole
            // batch's pairs).
            let mut plain = moe(tokens, 1.0, Routing::Balanced, "mxfp4", None);
            plain.experts = 32.0;
            plain.mean_touched = 32.0;
            let mapped = moe(tokens * 8.0, 8.0, Routing::Balanced, "mxfp4", None);
            assert!((mapped.mean_touched - 32.0).abs() < 1e-6);
            let (_, _, t1, _) = moe_time(&plain, &dev);
            let (_, _, t8, _) = moe_time(&mapped, &dev);
            assert!(
                t8 - t1 >= k.expert_map_fixed.0 - 1e-12,
                "{tokens}: {t1} {t8}"
            );
        }
        // A kernel without a map cost keeps its EP time.
        assert_eq!(
            dev.moe_kernel("bf16".parse().unwrap()).expert_map_fixed.0,
            0.0
        );
    }

    #[test]
    fn a_named_moe_library_runs_at_its_constants_else_the_default() {
        let sys = b200();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let nvfp4 = "nvfp4".parse().unwrap();
        let default = dev.moe_kernel(nvfp4);
        assert_eq!(default.backend, Some(MoeBackend::Trtllm));
        assert!(std::ptr::eq(
            dev.moe_kernel_on(nvfp4, Some(MoeBackend::Trtllm)),
            default
        ));
        assert!(!std::ptr::eq(
            dev.moe_kernel_on(nvfp4, Some(MoeBackend::Cutlass)),
            default
        ));
        // No Triton constants on SM100: the default runs.
        assert!(std::ptr::eq(
            dev.moe_kernel_on(nvfp4, Some(MoeBackend::Triton)),
            default
        ));
        assert_eq!(
            MoeBackend::from_kernel_name(
                "vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular"
            ),
            Some(MoeBackend::TrtllmMxfp8)
        );
        assert_eq!(
            MoeBackend::from_kernel_name("vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmodular"),
            Some(MoeBackend::TrtllmModular)
        );
        assert_eq!(
            MoeBackend::from_kernel_name(
                "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"
            ),
            Some(MoeBackend::Trtllm)
        );
        assert_eq!(
            MoeBackend::from_kernel_name(
                "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts"
            ),
            Some(MoeBackend::Marlin)
        );
    }

    /// An MLA decode call of DeepSeek-V3's latent shape (576 cached, 1088 FLOP dims) with
    /// FP8 latents: (queries, heads, flops, kv bytes, other bytes).
    fn mla(batch: f64, heads: f64, span: f64) -> (f64, f64, f64, f64, f64) {
        let flops = 2.0 * batch * heads * span * (576.0 + 512.0);
        (
            batch,
            heads,
            flops,
            batch * span * 576.0,
            batch * heads * 1088.0 * 2.0,
        )
    }

    fn mla_shape(s: (f64, f64, f64, f64, f64), kv_dtype: KvDtype) -> MlaDecodeShape {
        MlaDecodeShape {
            sequences: s.0,
            queries: s.0,
            heads: s.1,
            flops: s.2,
            kv_dtype,
        }
    }

    fn mla_time(dev: &Device, s: (f64, f64, f64, f64, f64)) -> f64 {
        mla_decode_time(dev, &mla_shape(s, KvDtype::Bf16), s.3, s.4).unwrap()
    }

    fn h100() -> crate::spec::System {
        crate::spec::System::load("8x-h100-nvlink").unwrap()
    }

    #[test]
    fn mla_decode_time_grows_with_context() {
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let mut last = 0.0;
        for span in [1.0, 64.0, 1000.0, 4096.0, 65536.0, 131072.0] {
            let t = mla_time(&dev, mla(64.0, 16.0, span));
            assert!(t >= last, "span {span}: {t} < {last}");
            last = t;
        }
    }

    /// On SM100 the MLA kernel multiplies an FP8 cache at the FP8 rate: a compute-bound call
    /// (128 heads, long context) with an FP8 cache takes about half the BF16 one, below what
    /// its products alone take at the BF16 rate.
    #[test]
    fn an_fp8_cache_halves_compute_bound_mla_where_the_kernel_multiplies_fp8() {
        let b = b200();
        let d = Device::new(&b, crate::cost::CostParams::default_for(&b)).unwrap();
        assert!(d.kernels.mla_decode.fp8_kv_math);
        let s = mla(512.0, 128.0, 65536.0);
        let t =
            |kv: KvDtype, bytes: f64| mla_decode_time(&d, &mla_shape(s, kv), bytes, s.4).unwrap();
        let (bf, fp) = (t(KvDtype::Bf16, s.3 * 2.0), t(KvDtype::Fp8, s.3));
        assert!(fp < 0.6 * bf, "fp8 {fp} vs bf16 {bf}");
        let bf16_math = s.2 / (d.kernels.mla_decode.compute_fraction * d.bf16_peak);
        assert!(
            fp < bf16_math,
            "fp8 {fp} vs its products at the BF16 rate {bf16_math}"
        );
    }

    #[test]
    fn mla_decode_more_sms_never_slower() {
        let sys = h100();
        let mut more = sys.clone();
        more.gpu.sm_count = sys.gpu.sm_count.map(|n| n * 2);
        let p = crate::cost::CostParams::default_for(&sys);
        let (a, b) = (
            Device::new(&sys, p).unwrap(),
            Device::new(&more, p).unwrap(),
        );
        for s in [
            mla(1.0, 16.0, 8.0),
            mla(1024.0, 128.0, 4.0),
            mla(64.0, 16.0, 8192.0),
        ] {
            assert!(mla_time(&b, s) <= mla_time(&a, s));
        }
    }

    #[test]
    fn mla_decode_pads_heads_to_the_tile() {
        // Compute-bound (long context, FP8 latents): 16 heads cost the math of 64, so the
        // call takes as long as 64 heads' less the per-row cost.
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let k = &dev.kernels.mla_decode;
        assert_eq!(k.head_tile, 64);
        let rows = |q: f64, h: f64| k.per_row.0 * q * h / dev.sm_count;
        let t16 = mla_time(&dev, mla(128.0, 16.0, 32768.0)) - rows(128.0, 16.0);
        let t64 = mla_time(&dev, mla(128.0, 64.0, 32768.0)) - rows(128.0, 64.0);
        assert!((t16 - t64).abs() < 1e-9 * t64, "{t16} vs {t64}");
        // and the speed of light has no kernel model.
        let sol = Device::new(&sys, crate::cost::CostParams::speed_of_light()).unwrap();
        let s = mla(1.0, 16.0, 8.0);
        assert!(mla_decode_time(&sol, &mla_shape(s, KvDtype::Bf16), s.3, s.4).is_none());
    }

    #[test]
    fn decode_attention_warm_l2_only_speeds_a_cache_that_fits_and_grows_with_context() {
        for sys in [h100(), b200()] {
            let (cold, warm) = cold_and_warm(&sys);
            let l2 = sys.gpu.l2_cache.map_or(0.0, |b| b.0);
            let per_pos = 2.0 * 8.0 * 128.0 * 2.0;
            let (mut last_c, mut last_w) = (0.0, 0.0);
            for span in [1.0, 128.0, 4096.0, 32768.0, 131072.0] {
                let kv = 8.0 * span * per_pos;
                let c =
                    decode_attention_time(&cold, &gqa(8.0, span, false), None, kv, 1e5).unwrap();
                let w =
                    decode_attention_time(&warm, &gqa(8.0, span, false), None, kv, 1e5).unwrap();
                assert!(w <= c && c >= last_c && w >= last_w * (1.0 - 1e-12) || kv > l2);
                if kv > l2 {
                    assert_eq!(w, c, "a cache larger than L2 streams from DRAM");
                }
                assert!(c >= cold.kernels.decode_attention.floor.0);
                (last_c, last_w) = (c, w);
            }
        }
    }

    #[test]
    fn moe_warm_l2_speeds_only_weights_that_fit_and_never_passes_the_harness_bound() {
        // L40S (Ada, a fitted warm-L2 speedup): a repeated call whose busiest rank's weights
        // fit in the 96 MB L2 runs faster than cold, and never under the speed of light of
        // that harness (weights free); weights larger than L2 stream from DRAM either way.
        let sys = l40s();
        let (cold, warm) = cold_and_warm(&sys);
        let mut sol = Device::new(&sys, crate::cost::CostParams::speed_of_light()).unwrap();
        sol.harness = Harness::RepeatsOneSet;
        // One 88 MB BF16 expert per rank at EP 256 fits; all 256 (22 GB) at EP 1 do not.
        for (ep, fits) in [(256.0, true), (1.0, false)] {
            let s = moe(64.0, ep, Routing::Balanced, "bf16", None);
            let (_, _, c, _) = moe_time(&s, &cold);
            let (_, _, w, _) = moe_time(&s, &warm);
            let (_, _, floor, _) = moe_time(&s, &sol);
            assert!(floor <= w, "ep{ep}: {floor} > {w}");
            if fits {
                assert!(w < c, "ep{ep}: {w} !< {c}");
            } else {
                assert_eq!(w, c, "ep{ep}: weights past L2 stream from DRAM");
            }
        }
        // Predictions never run warm.
        assert_eq!(cold.harness, Harness::None);
    }

    /// `sequences` sequences of 32 query heads over 8 KV heads attending `span` positions.
    fn gqa(sequences: f64, span: f64, windowed: bool) -> DecodeShape {
        DecodeShape {
            sequences,
            kv_heads: 8.0,
            heads: 32.0,
            windowed,
            span,
            kv_dtype: KvDtype::Bf16,
        }
    }

    fn l40s() -> crate::spec::System {
        crate::spec::System::load("8x-l40s-pcie").unwrap()
    }

    /// `sys` under its default parameters as predictions see it (cold L2), and the same
    /// GPU under a benchmark harness that repeats the call on one set of data (warm L2).
    fn cold_and_warm(sys: &crate::spec::System) -> (Device<'_>, Device<'_>) {
        let cold = Device::new(sys, crate::cost::CostParams::default_for(sys)).unwrap();
        let mut warm = cold.clone();
        warm.harness = Harness::RepeatsOneSet;
        (cold, warm)
    }

    const ATTENTION_BACKENDS: [Option<AttentionBackend>; 7] = [
        None,
        Some(AttentionBackend::Fa2),
        Some(AttentionBackend::Fa3),
        Some(AttentionBackend::Fa4),
        Some(AttentionBackend::Flashinfer),
        Some(AttentionBackend::FlashinferTrtllm),
        Some(AttentionBackend::Triton),
    ];

    #[test]
    fn a_named_attention_library_runs_at_its_constants_else_the_default() {
        let sys = l40s();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let default = &dev.kernels.decode_attention;
        // Ada's prediction kernel names no library: its FA2 microbenchmark fit is a library of
        // its own (configs/kernels/ada.toml, decode_attention_serving).
        assert_eq!(default.backend, None);
        assert!(std::ptr::eq(dev.decode_attention_on(None), default));
        let fa2 = dev.decode_attention_on(Some(AttentionBackend::Fa2));
        assert!(!std::ptr::eq(fa2, default));
        assert_eq!(fa2.backend, Some(AttentionBackend::Fa2));
        let fi = dev.decode_attention_on(Some(AttentionBackend::Flashinfer));
        assert!(!std::ptr::eq(fi, default));
        assert_eq!(fi.backend, Some(AttentionBackend::Flashinfer));
        // No FA3 constants on Ada: the default runs.
        assert!(std::ptr::eq(
            dev.decode_attention_on(Some(AttentionBackend::Fa3)),
            default
        ));
    }

    #[test]
    fn fa2_runs_a_windowed_call_per_query_head() {
        let sys = l40s();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let kv = 512.0 * 8.0 * 128.0 * 2.0 * 2.0;
        let t = |w, b| decode_attention_time(&dev, &gqa(512.0, 1.0, w), b, kv, 1e5).unwrap();
        assert!(t(true, None) > t(false, None));
        let triton = Some(AttentionBackend::Triton);
        assert_eq!(t(true, triton), t(false, triton));
    }

    /// Marlin's block height follows vLLM's rule on the mean load over local experts (under
    /// expert parallelism every rank's pairs over this rank's experts: taller than the local
    /// load needs). The table effect is guarded by tests/kernel_tables.rs.
    #[test]
    fn marlin_blocks_follow_the_mean_load_over_local_experts() {
        assert_eq!(mean_load_block(1.0), 8.0);
        assert_eq!(mean_load_block(7.1), 8.0);
        assert_eq!(mean_load_block(7.3), 16.0);
        assert_eq!(mean_load_block(40.0), 48.0);
        assert_eq!(mean_load_block(1000.0), 64.0);
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let int4: WeightFormat = "int4-g128".parse().unwrap();
        assert!(dev.moe_kernel(int4).block_from_mean_load);
        // Hopper's Marlin INT4 runs it; another library does not.
        let bf16 = WeightFormat::BF16;
        assert!(!dev.moe_kernel(bf16).block_from_mean_load);
    }

    /// A windowed FA2 call runs one item per query head; their re-reads of a KV head's cache
    /// come from L2 while that head's cache over the batch fits in it, from DRAM beyond.
    #[test]
    fn per_query_head_rereads_hit_l2_only_while_the_batch_head_cache_fits() {
        let sys = l40s();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let l2 = sys.gpu.l2_cache.unwrap().0;
        let bw = dev.system.gpu.memory_bandwidth.0;
        // (sequences, span) whose per-KV-head cache over the batch is a quarter of L2, then
        // four times L2: the DRAM stream of 4 query heads per KV head is 1x, then 4x, the
        // unique cache.
        for (factor, reads) in [(0.25, 1.0), (4.0, 4.0)] {
            let seqs = 16.0;
            let per_head = factor * l2 / seqs;
            let span = per_head / (128.0 * 2.0 * 2.0);
            let kv = seqs * 8.0 * per_head;
            let t = decode_attention_time(&dev, &gqa(seqs, span, true), None, kv, 0.0).unwrap();
            // At least the DRAM stream the re-reads make, at full bandwidth.
            assert!(t >= reads * kv / bw, "factor {factor}: {t}");
            if reads == 1.0 {
                // Under the 4x stream the re-reads from DRAM would cost.
                let k = dev.decode_attention_on(None);
                let eta = Device::attained(k.memory_fraction, dev.mem_eff);
                assert!(t < 4.0 * kv / (eta * bw), "factor {factor}: {t}");
            }
        }
    }

    #[test]
    fn decode_attention_grows_with_context_on_every_library() {
        for sys in [l40s(), h100(), b200()] {
            let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
            for b in ATTENTION_BACKENDS {
                for windowed in [false, true] {
                    let mut last = 0.0;
                    for span in [1.0, 100.0, 128.0, 1000.0, 8192.0, 131072.0] {
                        let kv = 4.0 * span * 8.0 * 128.0 * 2.0 * 2.0;
                        let s = gqa(4.0, span, windowed);
                        let t = decode_attention_time(&dev, &s, b, kv, 1e5).unwrap();
                        assert!(t >= last, "{} {b:?} span {span}", sys.gpu.name);
                        last = t;
                    }
                }
            }
        }
    }

    /// More SMs or more DRAM bandwidth never slow a decode call, full or not: a call too
    /// small to fill the SMs streams at its CTAs' per-SM rate, which idle SMs do not lower.
    #[test]
    fn decode_attention_more_sms_or_bandwidth_never_slower() {
        for sys in [l40s(), h100(), b200()] {
            let mut more_sms = sys.clone();
            more_sms.gpu.sm_count = sys.gpu.sm_count.map(|n| n * 2);
            let mut more_bw = sys.clone();
            more_bw.gpu.memory_bandwidth.0 *= 2.0;
            let p = crate::cost::CostParams::default_for(&sys);
            let a = Device::new(&sys, p).unwrap();
            let others = [
                Device::new(&more_sms, p).unwrap(),
                Device::new(&more_bw, p).unwrap(),
            ];
            for b in ATTENTION_BACKENDS {
                for (seqs, kv_heads, heads) in
                    [(1.0, 1.0, 1.0), (1.0, 1.0, 8.0), (256.0, 8.0, 32.0)]
                {
                    for windowed in [false, true] {
                        for span in [1.0, 1000.0, 8192.0, 131072.0] {
                            let s = DecodeShape {
                                sequences: seqs,
                                kv_heads,
                                heads,
                                windowed,
                                span,
                                kv_dtype: KvDtype::Bf16,
                            };
                            let kv = seqs * kv_heads * span * 2.0 * 128.0 * 2.0;
                            let ta = decode_attention_time(&a, &s, b, kv, 1e5).unwrap();
                            for m in &others {
                                let tm = decode_attention_time(m, &s, b, kv, 1e5).unwrap();
                                assert!(
                                    tm <= ta * (1.0 + 1e-12),
                                    "{} {b:?} {seqs}x{kv_heads}/{heads} span {span}",
                                    sys.gpu.name
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The per-SM load cap binds only with few work items: one sequence of one KV head at a
    /// long context, unsplit, streams at one SM's rate (far under the GPU's bandwidth),
    /// while a call that fills every SM many times over streams at the DRAM rate whatever
    /// one SM could pull.
    #[test]
    fn decode_attention_per_sm_cap_binds_only_with_few_items() {
        let sys = l40s();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let fa2 = Some(AttentionBackend::Fa2);
        let k = dev.decode_attention_on(fa2);
        assert!(k.splits_only_packed);
        // MHA (one query head per KV head): FA2's unpacked path, one CTA, no split.
        // Measured on L40S: b=1 h=1/1 d=128 ctx=16383 in 305 us (8.4 MB, 28 GB/s).
        let one = DecodeShape {
            sequences: 1.0,
            kv_heads: 1.0,
            heads: 1.0,
            windowed: false,
            span: 16383.0,
            kv_dtype: KvDtype::Bf16,
        };
        let kv = 16383.0 * 2.0 * 128.0 * 2.0;
        let t = decode_attention_time(&dev, &one, fa2, kv, 512.0).unwrap();
        let one_sm = kv / k.sm_load_bandwidth.0;
        assert!(t >= one_sm, "{t} < {one_sm}");
        assert!(t > 10.0 * kv / sys.gpu.memory_bandwidth.0);
        assert!(t > 200e-6 && t < 400e-6, "{t}");
        // Many items: a faster SM changes nothing, the DRAM stream bounds the call.
        let mut fast = dev.clone();
        let mut kk = k.clone();
        kk.sm_load_bandwidth.0 *= 10.0;
        let many = DecodeShape {
            sequences: 512.0,
            kv_heads: 8.0,
            heads: 32.0,
            windowed: false,
            span: 4096.0,
            kv_dtype: KvDtype::Bf16,
        };
        let kv = 512.0 * 8.0 * 4096.0 * 2.0 * 128.0 * 2.0;
        let base = decode_attention_time(&dev, &many, fa2, kv, 1e6).unwrap();
        let kernels = Box::leak(Box::new(dev.kernels.clone()));
        kernels
            .decode_attention_backends
            .insert(AttentionBackend::Fa2, kk);
        fast.kernels = kernels;
        let faster_sm = decode_attention_time(&fast, &many, fa2, kv, 1e6).unwrap();
        assert_eq!(base, faster_sm);
        // ... while the one-item call speeds up with it.
        let kv1 = 16383.0 * 2.0 * 128.0 * 2.0;
        let t_fast = decode_attention_time(&fast, &one, fa2, kv1, 512.0).unwrap();
        assert!(t_fast < 0.5 * t, "{t_fast} vs {t}");
    }

    /// An FP8 cache: half the bytes of the BF16 one, consumed per SM at `fp8_kv_load_rate`
    /// of the BF16 byte rate, after the query's FP8 quantization. Its stream is never
    /// faster than DRAM moving half the bytes, and a call that fills the GPU many times
    /// over streams it faster than the BF16 one; a call of one CTA is bound by its SM,
    /// taking `0.5 / fp8_kv_load_rate` of the BF16 stream time.
    #[test]
    fn fp8_cache_streams_at_dram_rate_and_its_per_sm_rate() {
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let k = dev.decode_attention_on(None);
        assert!(k.fp8_kv_load_rate < 1.0 && k.fp8_query_quant.0 > 0.0);
        // Stream time: the call less its floor, per-item cost and query quantization.
        let stream = |s: &DecodeShape, kv_dtype: KvDtype, kv: f64| {
            let s = DecodeShape { kv_dtype, ..*s };
            let items = s.sequences * s.kv_heads;
            let fixed = k.floor.0
                + k.per_item.0 * items / dev.sm_count
                + if kv_dtype == KvDtype::Fp8 {
                    k.fp8_query_quant.0
                } else {
                    0.0
                };
            decode_attention_time(&dev, &s, None, kv, 0.0).unwrap() - fixed
        };
        // Many items over a long context.
        let many = gqa(512.0, 8192.0, false);
        let kv16 = 512.0 * 8.0 * 8192.0 * 2.0 * 128.0 * 2.0;
        let (s16, s8) = (
            stream(&many, KvDtype::Bf16, kv16),
            stream(&many, KvDtype::Fp8, kv16 / 2.0),
        );
        assert!(s8 < s16 && s8 >= 0.5 * s16 * (1.0 - 1e-9), "{s8} {s16}");
        // One item over a span a 16-bit tile covers twice: one CTA's rate binds.
        let one = DecodeShape {
            sequences: 1.0,
            kv_heads: 1.0,
            heads: 8.0,
            windowed: false,
            span: 4.0 * k.min_block as f64,
            kv_dtype: KvDtype::Bf16,
        };
        let kv16 = one.span * 2.0 * 128.0 * 2.0;
        let ratio = stream(&one, KvDtype::Fp8, kv16 / 2.0) / stream(&one, KvDtype::Bf16, kv16);
        assert!(
            (ratio - 0.5 / k.fp8_kv_load_rate).abs() < 1e-9,
            "{ratio} vs {}",
            0.5 / k.fp8_kv_load_rate
        );
    }

    /// A CTA pays for one whole tile of `min_block` positions however short its share: a
    /// decode over a few positions costs what one over `min_block` does, and never less
    /// than a shorter one.
    #[test]
    fn decode_attention_pays_one_tile_at_least() {
        let sys = h100();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let k = dev.decode_attention_on(None);
        assert!(k.min_block > 1);
        let per_pos = 2.0 * 128.0 * 2.0;
        let at = |span: f64| {
            let s = DecodeShape {
                sequences: 1.0,
                kv_heads: 1.0,
                heads: 8.0,
                windowed: false,
                span,
                kv_dtype: KvDtype::Bf16,
            };
            decode_attention_time(&dev, &s, None, span * per_pos, 0.0).unwrap()
        };
        let tile = at(k.min_block as f64);
        assert!((at(1.0) - tile).abs() < 1e-15);
        assert!((at(k.min_block as f64 / 2.0) - tile).abs() < 1e-15);
        let mut last = 0.0;
        for span in [1.0, 16.0, 64.0, 100.0, 128.0, 1000.0, 8192.0] {
            let t = at(span);
            assert!(t >= last, "span {span}");
            last = t;
        }
    }

    /// FlashAttention 2 splits KV only on its packed path: a GQA call without a window (a KV
    /// head's query heads in one item) splits a long context over many SMs, the same cache
    /// read by an MHA call (one item per query head, unsplit) takes several times longer.
    #[test]
    fn fa2_splits_only_its_packed_path() {
        let sys = l40s();
        let dev = Device::new(&sys, crate::cost::CostParams::default_for(&sys)).unwrap();
        let fa2 = Some(AttentionBackend::Fa2);
        let shape = |heads: f64| DecodeShape {
            sequences: 1.0,
            kv_heads: 1.0,
            heads,
            windowed: false,
            span: 8192.0,
            kv_dtype: KvDtype::Bf16,
        };
        let kv = 8192.0 * 2.0 * 128.0 * 2.0;
        let packed = decode_attention_time(&dev, &shape(8.0), fa2, kv, 1e4).unwrap();
        let mha = decode_attention_time(&dev, &shape(1.0), fa2, kv, 1e4).unwrap();
        assert!(mha > 3.0 * packed, "{mha} vs {packed}");
        // A library that splits every path (FlashInfer) splits both.
        let fi = Some(AttentionBackend::Flashinfer);
        let p = decode_attention_time(&dev, &shape(8.0), fi, kv, 1e4).unwrap();
        let m = decode_attention_time(&dev, &shape(1.0), fi, kv, 1e4).unwrap();
        assert!(m < 1.5 * p, "{m} vs {p}");
    }
}
