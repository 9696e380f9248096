//! Property tests over random *valid* descriptions within physical ranges: whatever GPU,
//! interconnect, system, model, layout, batch and context a user can describe, the cost model
//! returns finite, positive times whose breakdown sums to the total, the speed-of-light bound
//! stays below the prediction, more hardware never slows a step, and more work never speeds
//! one up. The serving sweep and speculative decoding keep their own invariants on the same
//! scenarios.
//!
//! The descriptions are built as structs (the spec types' fields are public), not read from
//! files, so these tests exercise the cost model alone; `fuzz_readers.rs` covers the readers.
//! 64 cases per property by default; `PROPTEST_CASES=N` raises it.

mod common;

use proptest::prelude::*;
use proptest::test_runner::Config;
use rooftop::cost::{CostParams, Evaluator, Parallel, Pass, StepCost};
use rooftop::predict::{predict, Scenario};
use rooftop::serve::{sweep, TpotDef, Workload};
use rooftop::spec::gpu::DensePeak;
use rooftop::spec::interconnect::{AlgorithmLatency, ProtocolLatency};
use rooftop::spec::model::{DraftHeadSpec, ModelConfig, QuantSpec};
use rooftop::spec::system::{EfficiencySpec, EngineSpec, GemmEfficiency};
use rooftop::spec::{
    AllReduceImpl, FormatKind, GpuSpec, InterconnectSpec, KvDtype, LinkKind, ModelSpec,
    NcclAlgorithm, NcclProtocol, System, SystemSpec, Topology, WeightFormat,
};
use rooftop::specdec::{specdec, Acceptance, Draft};
use rooftop::units::{Bytes, BytesPerSec, FlopsPerSec, Fraction, Seconds};
use std::collections::BTreeMap;

/// 64 cases unless `PROPTEST_CASES` says otherwise; no persistence files (regressions found
/// here are kept by hand in `tests/regressions.rs`).
fn config() -> Config {
    let mut c = Config::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        c.cases = 64;
    }
    c.failure_persistence = None;
    c
}

/// Log-uniform value in `[lo, hi]`: bandwidths and peaks span orders of magnitude.
fn log_range(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    (lo.ln()..=hi.ln()).prop_map(f64::exp)
}

fn seconds(lo: f64, hi: f64) -> impl Strategy<Value = Seconds> {
    log_range(lo, hi).prop_map(Seconds)
}

fn fraction() -> impl Strategy<Value = Fraction> {
    // (0, 1]: the upper end exactly, sometimes.
    prop_oneof![Just(1.0), 0.05f64..=1.0].prop_map(Fraction)
}

fn gpu() -> impl Strategy<Value = GpuSpec> {
    (
        log_range(100e9, 20e12),            // memory bandwidth, B/s
        log_range(8e9, 300e9),              // capacity, B
        log_range(10e12, 5000e12),          // dense BF16, FLOP/s
        proptest::option::of(1.0f64..=2.0), // FP8 / BF16
        proptest::option::of(1.0f64..=2.0), // FP4 / FP8
        proptest::option::of(1.0f64..=2.0), // INT8 / BF16
        prop_oneof![Just(80u32), Just(89), Just(90), Just(100), Just(120)], // generation
        16u32..=256,                        // SMs
    )
        .prop_map(|(bw, cap, bf16, fp8, fp4, int8, sm, sms)| {
            // A part carries the tensor-core dtypes its generation's kernels quantize
            // activations to (INT8 everywhere; FP8 from SM89; FP4 on SM100 and SM120): one
            // without them is refused by name (tests/hardware.rs), not priced. Ampere has
            // neither FP8 nor FP4; FP4 stays optional on Ada and Hopper (weight-only there).
            let (fp8, fp4, int8) = match sm {
                80 => (None, None, int8.or(Some(2.0))),
                89 | 90 => (fp8.or(Some(2.0)), fp4, int8.or(Some(2.0))),
                _ => (fp8.or(Some(2.0)), fp4.or(Some(2.0)), int8.or(Some(2.0))),
            };
            let fp8 = fp8.map(|r| bf16 * r);
            GpuSpec {
                name: "prop-gpu".into(),
                full_name: "property-test GPU".into(),
                architecture: format!("property-test, SM{sm}"),
                memory_capacity: Bytes(cap),
                memory_bandwidth: BytesPerSec(bw),
                sm_count: Some(sms),
                boost_clock: None,
                l2_cache: None,
                host_link: None,
                board_power: None,
                idle_power: None,
                power_limit: None,
                dense_peak: DensePeak {
                    bf16: Some(FlopsPerSec(bf16)),
                    fp8: fp8.map(FlopsPerSec),
                    // FP4 tensor cores come with FP8 ones.
                    fp4: fp8.and_then(|f| fp4.map(|r| FlopsPerSec(f * r))),
                    int8: int8.map(|r| FlopsPerSec(bf16 * r)),
                },
                sources: BTreeMap::new(),
            }
        })
}

fn protocol_latency() -> impl Strategy<Value = ProtocolLatency> {
    (
        seconds(0.5e-6, 30e-6),
        seconds(0.5e-6, 30e-6),
        seconds(0.5e-6, 30e-6),
    )
        .prop_map(|(ll, ll128, simple)| ProtocolLatency { ll, ll128, simple })
}

fn algorithm_latency() -> impl Strategy<Value = AlgorithmLatency> {
    (protocol_latency(), protocol_latency())
        .prop_map(|(ring, tree)| AlgorithmLatency { ring, tree })
}

fn link() -> impl Strategy<Value = InterconnectSpec> {
    (
        prop_oneof![Just(LinkKind::Pcie), Just(LinkKind::Nvlink)],
        log_range(8e9, 2e12),               // raw per direction
        0.3f64..=1.0,                       // achievable / raw
        proptest::option::of(0.3f64..=1.0), // cross-socket / p2p
        seconds(0.1e-6, 5e-6),
        proptest::option::of(seconds(1e-6, 50e-6)),
        algorithm_latency(),
        algorithm_latency(),
    )
        .prop_map(
            |(kind, raw, p2p, cross, p2p_latency, staged_latency, base, step)| InterconnectSpec {
                name: "prop-link".into(),
                full_name: "property-test link".into(),
                kind,
                bandwidth_per_direction: BytesPerSec(raw),
                p2p_bandwidth: BytesPerSec(raw * p2p),
                cross_socket_bandwidth: cross.map(|c| BytesPerSec(raw * p2p * c)),
                p2p_latency,
                staged_latency,
                nccl_base_latency: base,
                nccl_step_latency: step,
                collective: None,
                sources: BTreeMap::new(),
            },
        )
}

fn engine() -> impl Strategy<Value = EngineSpec> {
    (
        (
            any::<bool>(),
            prop_oneof![
                Just(AllReduceImpl::Nccl),
                Just(AllReduceImpl::VllmAuto),
                Just(AllReduceImpl::Custom)
            ],
            prop_oneof![
                Just(NcclAlgorithm::Ring),
                Just(NcclAlgorithm::Tree),
                Just(NcclAlgorithm::Auto)
            ],
            prop_oneof![
                Just(NcclProtocol::Ll),
                Just(NcclProtocol::Ll128),
                Just(NcclProtocol::Simple),
                Just(NcclProtocol::Auto)
            ],
            log_range(64e3, 64e6), // custom all-reduce limit
            log_range(4e3, 4e6),   // one-shot limit
        ),
        (
            seconds(0.1e-6, 20e-6), // kernel gap
            seconds(1e-6, 30e-6),   // launch
            prop_oneof![Just(Seconds(0.0)), seconds(1e-6, 5e-3)],
            fraction(),
            log_range(1e8, 16e9), // activation reserve
            1u32..=4096,
            1u32..=65536,
            (any::<bool>(), any::<bool>()), // chunked prefill, prefill mixed with decode
            proptest::collection::vec(
                prop_oneof![
                    Just(FormatKind::Fp8),
                    Just(FormatKind::Int8),
                    Just(FormatKind::Int4),
                    Just(FormatKind::Nvfp4),
                    Just(FormatKind::Mxfp4)
                ],
                0..3,
            ),
        ),
    )
        .prop_map(
            |(
                (cuda_graphs, allreduce, nccl_algorithm, nccl_protocol, custom_max, one_shot),
                (gap, launch, step, util, reserve, seqs, tokens, (chunked, mixed), unfused),
            )| EngineSpec {
                name: "prop-engine".into(),
                cuda_graphs,
                allreduce,
                nccl_algorithm,
                nccl_protocol,
                nccl_p2p_level: Default::default(),
                custom_allreduce_max: Bytes(custom_max),
                one_shot_max: Bytes(one_shot),
                one_shot_max_4gpu: None,
                symm_mem_max: None,
                kernel_gap: gap,
                kernel_launch: launch,
                step_overhead: step,
                gpu_memory_utilization: util,
                memory_fraction_of: Default::default(),
                weight_block_split: Default::default(),
                activation_reserve: Bytes(reserve),
                max_num_seqs: seqs,
                max_num_batched_tokens: tokens,
                chunked_prefill: chunked,
                prefill_mixes_with_decode: Some(mixed),
                unfused_dequant: unfused,
                gemm_family: Default::default(),
                moe_library: Default::default(),
                fusion: Default::default(),
                cpu: Default::default(),
                speculation: Default::default(),
                kv: Default::default(),
                cuda_graph_max_tokens: None,
                cuda_graph_counts: Default::default(),
                moe_all_to_all: Default::default(),
                scheduler_recv_interval: 1,
                max_num_seqs_when_speculating: None,
                attention_dp_balance: None,
                batch_wait: None,
            },
        )
}

fn efficiency() -> impl Strategy<Value = EfficiencySpec> {
    (
        fraction(),
        [
            fraction(),
            fraction(),
            fraction(),
            fraction(),
            fraction(),
            fraction(),
        ],
        fraction(),
        fraction(),
    )
        .prop_map(|(memory, g, attention, link)| EfficiencySpec {
            memory,
            gemm: GemmEfficiency {
                bf16: g[0],
                fp8: g[1],
                int8: g[2],
                int4: g[3],
                nvfp4: g[4],
                mxfp4: g[5],
            },
            attention,
            link,
        })
}

fn system() -> impl Strategy<Value = System> {
    (
        gpu(),
        link(),
        1u32..=64,
        prop_oneof![
            Just(Topology::RootComplex),
            Just(Topology::PcieSwitch),
            Just(Topology::Nvswitch)
        ],
        1u32..=2,
        any::<bool>(),
        engine(),
        efficiency(),
    )
        .prop_map(
            |(gpu, link, gpu_count, topology, sockets, p2p, engine, efficiency)| {
                let spec = SystemSpec {
                    name: "prop-system".into(),
                    description: "property-test system".into(),
                    gpu: gpu.name.clone(),
                    gpu_count,
                    interconnect: link.name.clone(),
                    topology,
                    sockets,
                    gpus_per_switch: None,
                    paths: None,
                    p2p,
                    cpu_vendor: None,
                    price_per_gpu_hour_usd: None,
                    price_per_gpu_hour: None,
                    capital_per_gpu: None,
                    amortisation: None,
                    electricity: None,
                    nodes: None,
                    engine: rooftop::spec::system::EngineRef::Inline(Box::new(engine.clone())),
                    efficiency,
                    sources: BTreeMap::new(),
                };
                assert_eq!(spec.validate(), Ok(()));
                assert_eq!(gpu.validate(), Ok(()));
                assert_eq!(link.validate(), Ok(()));
                System {
                    described_efficiency: spec.efficiency,
                    spec,
                    gpu,
                    link,
                    engine,
                }
            },
        )
}

const FORMATS: [&str; 8] = [
    "bf16",
    "fp8",
    "fp8-block128",
    "int8",
    "int4-g32",
    "int4-g128",
    "nvfp4",
    "mxfp4",
];

fn weight_format() -> impl Strategy<Value = WeightFormat> {
    (0..FORMATS.len()).prop_map(|i| FORMATS[i].parse().unwrap())
}

/// Attention heads the generator draws from (multiples of small primes, as real models use).
const HEADS: [u32; 14] = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128];

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// Raw draws for a model; `build_model` turns them into a valid description.
#[derive(Debug, Clone)]
struct ModelDraw {
    layers: u32,
    heads_i: usize,
    hidden_mult: f64,
    attention: AttentionDraw,
    moe: Option<MoeDraw>,
    intermediate: u32,
    window: Option<(u32, Option<Vec<bool>>)>,
    vocab: u32,
    tie: bool,
    mtp: bool,
    eagle: Option<(u32, u32, WeightFormat, u32)>,
    /// The head's own attention: 2^a key/value heads, 2^(a+b) query heads, width.
    eagle_attention: Option<(u32, u32, u32)>,
    formats: [Option<WeightFormat>; 5],
    default_format: WeightFormat,
    kv: KvDtype,
}

#[derive(Debug, Clone)]
enum AttentionDraw {
    Gqa {
        kv_i: u32,
        head_dim: Option<u32>,
    },
    Mla {
        q_lora: Option<u32>,
        kv_lora: u32,
        nope: u32,
        rope: u32,
        v: u32,
        dsa: Option<(u32, u32, u32)>,
    },
}

#[derive(Debug, Clone)]
struct MoeDraw {
    experts: u32,
    top_k_frac: f64,
    shared: u32,
    width: u32,
    dense_first: Option<u32>,
}

fn attention_draw() -> impl Strategy<Value = AttentionDraw> {
    prop_oneof![
        (
            any::<u32>(),
            proptest::option::of(prop_oneof![Just(64u32), Just(128), Just(256)])
        )
            .prop_map(|(kv_i, head_dim)| AttentionDraw::Gqa { kv_i, head_dim }),
        (
            proptest::option::of(64u32..=2048),
            64u32..=1024,
            32u32..=192,
            16u32..=128,
            32u32..=192,
            proptest::option::of((64u32..=4096, 1u32..=64, 32u32..=256)),
        )
            .prop_map(|(q_lora, kv_lora, nope, rope, v, dsa)| AttentionDraw::Mla {
                q_lora,
                kv_lora,
                nope,
                rope,
                v,
                dsa
            }),
    ]
}

fn moe_draw() -> impl Strategy<Value = MoeDraw> {
    (
        2u32..=512,
        0.0f64..=1.0,
        0u32..=2,
        64u32..=8192,
        proptest::option::of(0u32..=8),
    )
        .prop_map(
            |(experts, top_k_frac, shared, width, dense_first)| MoeDraw {
                experts,
                top_k_frac,
                shared,
                width,
                dense_first,
            },
        )
}

fn model_draw() -> impl Strategy<Value = ModelDraw> {
    (
        (
            1u32..=128,
            0..HEADS.len(),
            0.0f64..=1.0,
            attention_draw(),
            proptest::option::of(moe_draw()),
            256u32..=65536,
            proptest::option::of((
                64u32..=8192,
                proptest::option::of(proptest::collection::vec(any::<bool>(), 128)),
            )),
        ),
        (
            1000u32..=262_144,
            any::<bool>(),
            any::<bool>(),
            proptest::option::of((1u32..=2, 256u32..=32768, weight_format(), 0u32..=65536)),
            [
                proptest::option::of(weight_format()),
                proptest::option::of(weight_format()),
                proptest::option::of(weight_format()),
                proptest::option::of(weight_format()),
                proptest::option::of(weight_format()),
            ],
            weight_format(),
            prop_oneof![Just(KvDtype::Bf16), Just(KvDtype::Fp8)],
        ),
        proptest::option::of((0u32..=3, 0u32..=3, prop_oneof![Just(64u32), Just(128u32)])),
    )
        .prop_map(
            |(
                (layers, heads_i, hidden_mult, attention, moe, intermediate, window),
                (vocab, tie, mtp, eagle, formats, default_format, kv),
                eagle_attention,
            )| ModelDraw {
                layers,
                heads_i,
                hidden_mult,
                attention,
                moe,
                intermediate,
                window,
                vocab,
                tie,
                mtp,
                eagle,
                eagle_attention,
                formats,
                default_format,
                kv,
            },
        )
}

fn build_model(d: &ModelDraw) -> ModelSpec {
    let heads = HEADS[d.heads_i];
    // hidden: a multiple of heads in 256..=16384.
    let lo = 256u32.div_ceil(heads);
    let hi = 16384 / heads;
    let mult = lo + ((hi - lo) as f64 * d.hidden_mult) as u32;
    let hidden = heads * mult;
    let mut c = ModelConfig {
        num_hidden_layers: d.layers,
        hidden_size: hidden,
        num_attention_heads: heads,
        vocab_size: d.vocab,
        tie_word_embeddings: d.tie,
        intermediate_size: Some(d.intermediate),
        ..ModelConfig::default()
    };
    match &d.attention {
        AttentionDraw::Gqa { kv_i, head_dim } => {
            let divs = divisors(heads);
            c.num_key_value_heads = Some(divs[*kv_i as usize % divs.len()]);
            c.head_dim = *head_dim;
        }
        AttentionDraw::Mla {
            q_lora,
            kv_lora,
            nope,
            rope,
            v,
            dsa,
        } => {
            c.q_lora_rank = *q_lora;
            c.kv_lora_rank = Some(*kv_lora);
            c.qk_nope_head_dim = Some(*nope);
            c.qk_rope_head_dim = Some(*rope);
            c.v_head_dim = Some(*v);
            if let Some((k, ih, id)) = dsa {
                c.index_topk = Some(*k);
                c.index_n_heads = Some(*ih);
                c.index_head_dim = Some(*id);
            }
        }
    }
    if let Some(m) = &d.moe {
        let top_k = 1 + ((m.experts - 1) as f64 * m.top_k_frac * m.top_k_frac) as u32;
        c.n_routed_experts = Some(m.experts);
        c.num_experts_per_tok = Some(top_k.min(m.experts));
        c.n_shared_experts = Some(m.shared);
        c.moe_intermediate_size = Some(m.width);
        c.first_k_dense_replace = m.dense_first.map(|f| f.min(d.layers));
    }
    if let Some((w, types)) = &d.window {
        c.sliding_window = Some(*w);
        c.layer_types = types.as_ref().map(|t| {
            t.iter()
                .take(d.layers as usize)
                .map(|s| {
                    if *s {
                        "sliding_attention"
                    } else {
                        "full_attention"
                    }
                    .to_string()
                })
                .collect()
        });
    }
    if d.mtp {
        c.num_nextn_predict_layers = Some(1);
    }
    let [attention, dense_mlp, shared_experts, routed_experts, lm_head] = d.formats;
    let m = ModelSpec {
        name: "prop-model".into(),
        full_name: "property-test model".into(),
        architecture: "PropForCausalLM".into(),
        vision: None,
        published_total_params: None,
        published_active_params: None,
        config: c,
        quantization: QuantSpec {
            default: d.default_format,
            attention,
            dense_mlp,
            shared_experts,
            routed_experts,
            lm_head,
            embedding: None,
            router: None,
            kv_cache: d.kv,
        },
        routing: Default::default(),
        eagle_head: d.eagle.map(
            |(num_layers, intermediate_size, format, vocab)| DraftHeadSpec {
                num_layers,
                intermediate_size,
                format,
                // A draft vocabulary is a subset of the target's.
                draft_vocab_size: vocab.min(d.vocab),
                num_attention_heads: d.eagle_attention.map(|(a, b, _)| 1 << (a + b)),
                num_key_value_heads: d.eagle_attention.map(|(a, _, _)| 1 << a),
                head_dim: d.eagle_attention.map(|(_, _, w)| w),
            },
        ),
        sources: BTreeMap::new(),
    };
    assert_eq!(
        m.validate(),
        Ok(()),
        "generator built an invalid model: {m:?}"
    );
    m
}

/// Raw draws for a layout; `build_layout` picks degrees the model and system accept.
#[derive(Debug, Clone, Copy)]
struct LayoutDraw {
    tp: u32,
    dp: u32,
    pp: u32,
    ep: u32,
}

fn layout_draw() -> impl Strategy<Value = LayoutDraw> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>())
        .prop_map(|(tp, dp, pp, ep)| LayoutDraw { tp, dp, pp, ep })
}

fn build_layout(d: LayoutDraw, m: &ModelSpec, s: &System) -> Parallel {
    let n = s.spec.gpu_count;
    let c = &m.config;
    let kv = c.num_key_value_heads;
    let mla = c.kv_lora_rank.is_some();
    let tps: Vec<u32> = divisors(c.num_attention_heads)
        .into_iter()
        .filter(|t| *t <= n)
        .filter(|t| mla || kv.is_none_or(|k| k.is_multiple_of(*t) || t.is_multiple_of(k)))
        .collect();
    let tp = tps[d.tp as usize % tps.len()];
    let dp = 1 + d.dp % (n / tp);
    let pp_max = (n / (tp * dp)).min(c.num_hidden_layers);
    let pp = 1 + d.pp % pp_max;
    let eps: Vec<u32> = match c.n_routed_experts {
        Some(e) => divisors(tp * dp)
            .into_iter()
            .filter(|x| e.is_multiple_of(*x))
            .collect(),
        None => vec![1],
    };
    let ep = eps[d.ep as usize % eps.len()];
    let p = Parallel {
        tp,
        ep,
        pp,
        dp,
        redundant_experts: 0,
    };
    if p.validate(m, s).is_ok() {
        return p;
    }
    // Block-scaled FP8 widths the draw's ranks would split into partial blocks are refused
    // (as vLLM refuses them); unsplit, any width runs.
    let p = Parallel {
        tp: 1,
        ep: 1,
        pp,
        dp: 1,
        redundant_experts: 0,
    };
    p.validate(m, s).unwrap();
    p
}

/// One random, valid scenario.
#[derive(Debug, Clone)]
struct Case {
    model: ModelSpec,
    system: System,
    par: Parallel,
    batch: u32,
    context: u32,
}

fn case() -> impl Strategy<Value = Case> {
    (
        model_draw(),
        system(),
        layout_draw(),
        prop_oneof![1u32..=64, 1u32..=65536],
        prop_oneof![Just(0u32), 0u32..=8192, 0u32..=1_000_000],
    )
        .prop_map(|(md, system, ld, batch, context)| {
            let model = build_model(&md);
            let par = build_layout(ld, &model, &system);
            Case {
                model,
                system,
                par,
                batch,
                context,
            }
        })
}

fn step(c: &Case, system: &System, params: CostParams, batch: f64, context: f64) -> StepCost {
    Evaluator::new(&c.model, system, c.par, params)
        .unwrap()
        .evaluate(&Pass::decode(batch, context))
}

fn default_step(c: &Case, system: &System, batch: f64, context: f64) -> f64 {
    step(c, system, CostParams::default_for(system), batch, context).total
}

/// Every number in a serialised record is finite: serde_json writes NaN and ±inf as `null`,
/// so a `null` where the record has a number is a non-finite value. `nullable` lists the keys
/// whose value may be absent by design.
fn assert_json_finite(v: &serde_json::Value, path: &str, nullable: &[&str]) {
    match v {
        serde_json::Value::Null => {
            let key = path.rsplit('.').next().unwrap_or(path);
            assert!(nullable.contains(&key), "{path} is null (a NaN or inf?)");
        }
        serde_json::Value::Number(n) => {
            let x = n.as_f64().unwrap();
            assert!(x.is_finite(), "{path} = {x}");
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_json_finite(x, &format!("{path}[{i}]"), nullable);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                assert_json_finite(x, &format!("{path}.{k}"), nullable);
            }
        }
        _ => {}
    }
}

/// A printed time, throughput or share: finite, not negative, and not negative zero (which
/// prints as "-0.000"). Keys are the records' names for such quantities.
fn assert_printed_quantities(v: &serde_json::Value, path: &str) {
    let quantity = |k: &str| {
        [
            "_ms",
            "_s",
            "tok_s",
            "share",
            "seconds",
            "speedup",
            "tpot",
            "ttft",
            "throughput",
        ]
        .iter()
        .any(|q| k.ends_with(q) || k == q.trim_start_matches('_'))
    };
    match v {
        serde_json::Value::Number(n) => {
            let key = path.rsplit('.').next().unwrap_or(path);
            let key = key.split('[').next().unwrap_or(key);
            if quantity(key) {
                let x = n.as_f64().unwrap();
                assert!(
                    x.is_finite() && x >= 0.0 && !(x == 0.0 && x.is_sign_negative()),
                    "{path} = {x:?}"
                );
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_printed_quantities(x, &format!("{path}[{i}]"));
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                assert_printed_quantities(x, &format!("{path}.{k}"));
            }
        }
        _ => {}
    }
}

/// Text a command prints: no NaN, no infinity, no negative zero.
fn assert_printed_text(t: &str, what: &str) {
    // "-0", "-0.000" not followed by another digit ("-0.6" is a negative number, not zero).
    let minus_zero = regex::Regex::new(r"-0(\.0*)?([^0-9.]|$)").unwrap();
    for bad in ["NaN", "inf"] {
        assert!(!t.contains(bad), "{what} prints {bad}:\n{t}");
    }
    assert!(
        !minus_zero.is_match(t),
        "{what} prints a negative zero:\n{t}"
    );
}

fn check_step(s: &StepCost, what: &str) {
    assert!(
        s.total.is_finite() && s.total > 0.0,
        "{what}: total {}",
        s.total
    );
    for (i, x) in s.breakdown.0.iter().enumerate() {
        assert!(x.is_finite() && *x >= 0.0, "{what}: category {i} = {x}");
    }
    let sum: f64 = s.breakdown.0.iter().sum();
    assert!(
        (sum - s.total).abs() <= 1e-9 * s.total,
        "{what}: breakdown sums to {sum}, total {}",
        s.total
    );
    for (o, n) in s.ops_with_counts() {
        for (k, x) in [
            ("flops", o.flops),
            ("bytes", o.bytes),
            ("time", o.time),
            ("overhead", o.overhead),
        ] {
            assert!(
                x.is_finite() && x >= 0.0,
                "{what}: {} x{n} {k} = {x}",
                o.name
            );
        }
    }
}

/// Relative slack for comparisons between two evaluations (rounding only).
const EPS: f64 = 1e-9;

proptest! {
    #![proptest_config(config())]

    /// Every output is finite and positive, the breakdown sums to the total, SOL ≤ default.
    #[test]
    fn outputs_are_finite_and_sol_is_a_lower_bound(c in case()) {
        let (b, ctx) = (c.batch as f64, c.context as f64);
        let d = step(&c, &c.system, CostParams::default_for(&c.system), b, ctx);
        let sol = step(&c, &c.system, CostParams::speed_of_light(), b, ctx);
        check_step(&d, "default");
        check_step(&sol, "speed of light");
        prop_assert!(sol.total <= d.total * (1.0 + EPS), "SOL {} > default {}", sol.total, d.total);
        // A prefill and a decode step with prompts mixed in are finite too.
        for p in [Pass::prefill(b.min(64.0), 1.0 + ctx.min(8192.0), 0.0),
                  Pass::decode(b, ctx).with_prefill(512.0, 512.0)] {
            for params in [CostParams::default_for(&c.system), CostParams::speed_of_light()] {
                let s = Evaluator::new(&c.model, &c.system, c.par, params).unwrap().evaluate(&p);
                check_step(&s, "prefill/mixed");
            }
        }
        // The whole `predict` record (memory report included) has only finite numbers.
        let sc = Scenario::new(&c.model, &c.system, c.par).unwrap();
        let rec = predict(&sc, c.batch, c.context).unwrap();
        // Watts and joules are absent by design where the GPU states no board power (the
        // generated GPUs here state none), and dollars where the system states no price.
        assert_json_finite(
            &serde_json::to_value(&rec).unwrap(),
            "prediction",
            common::ABSENT_BY_DESIGN,
        );
    }

    /// What the commands print (predict with every operator, sweep, specdec; JSON and text)
    /// holds no non-finite, negative or negative-zero time, throughput or share.
    #[test]
    fn no_command_prints_an_impossible_time_throughput_or_share(
        c in case(),
        concurrency in proptest::collection::vec(1u32..=512, 1..4),
        ks in proptest::collection::vec(1u32..=6, 1..3),
    ) {
        let sc = Scenario::new(&c.model, &c.system, c.par).unwrap();
        let rec = predict(&sc, c.batch, c.context).unwrap();
        assert_printed_quantities(&serde_json::to_value(&rec).unwrap(), "predict");
        assert_printed_text(&rooftop::commands::predict::text(&rec, true), "predict");
        let w = Workload { input_len: 256, output_len: 64, tpot_def: TpotDef::Itl, client: Default::default() };
        match sweep(&sc, &concurrency, w) {
            Ok(r) => {
                assert_printed_quantities(&serde_json::to_value(&r).unwrap(), "sweep");
                assert_printed_text(&rooftop::commands::sweep::text(&r), "sweep");
            }
            // Refused with its reason: nothing printed to check.
            Err(e) => assert!(e.to_string().starts_with("does not fit:"), "sweep failed: {e}"),
        }
        match specdec(&sc, &Draft::Ngram { cpu_seconds: 50e-6 }, &Acceptance(vec![0.6]), &ks, &concurrency, c.context) {
            Ok(r) => {
                assert_printed_quantities(&serde_json::to_value(&r).unwrap(), "specdec");
                assert_printed_text(&rooftop::commands::specdec::text(&r), "specdec");
            }
            // No concurrency fits in memory: refused with its reason, nothing printed.
            Err(e) => assert!(e.to_string().starts_with("does not fit:"), "specdec failed: {e}"),
        }
    }

    /// More memory bandwidth, FLOPS or link bandwidth never makes a step slower.
    #[test]
    fn more_hardware_is_never_slower(c in case()) {
        let (b, ctx) = (c.batch as f64, c.context as f64);
        let base = default_step(&c, &c.system, b, ctx);

        let mut s = c.system.clone();
        s.gpu.memory_bandwidth.0 *= 1.5;
        let t = default_step(&c, &s, b, ctx);
        prop_assert!(t <= base * (1.0 + EPS), "×1.5 memory bandwidth: {t} > {base}");

        let mut s = c.system.clone();
        let p = &mut s.gpu.dense_peak;
        for peak in [&mut p.bf16, &mut p.fp8, &mut p.fp4, &mut p.int8].into_iter().flatten() {
            peak.0 *= 2.0;
        }
        let t = default_step(&c, &s, b, ctx);
        prop_assert!(t <= base * (1.0 + EPS), "×2 FLOPS: {t} > {base}");

        let mut s = c.system.clone();
        s.link.bandwidth_per_direction.0 *= 2.0;
        s.link.p2p_bandwidth.0 *= 2.0;
        if let Some(x) = s.link.cross_socket_bandwidth.as_mut() {
            x.0 *= 2.0;
        }
        let t = default_step(&c, &s, b, ctx);
        prop_assert!(t <= base * (1.0 + EPS), "×2 link bandwidth: {t} > {base}");
    }

    /// Twice the batch or twice the context never makes a step faster.
    #[test]
    fn more_work_is_never_faster(c in case()) {
        let (b, ctx) = (c.batch as f64, c.context as f64);
        for params in [CostParams::default_for(&c.system), CostParams::speed_of_light()] {
            let base = step(&c, &c.system, params, b, ctx).total;
            let t = step(&c, &c.system, params, 2.0 * b, ctx).total;
            prop_assert!(t >= base * (1.0 - EPS), "batch ×2: {t} < {base}");
            let t = step(&c, &c.system, params, b, 2.0 * ctx).total;
            prop_assert!(t >= base * (1.0 - EPS), "context ×2: {t} < {base}");
        }
    }

    /// The serving sweep: finite numbers, TPOT(e2e) ≥ TPOT(itl), throughput above zero.
    #[test]
    fn serving_sweep_is_finite_and_consistent(
        c in case(),
        input_len in prop_oneof![1u32..=64, 1u32..=32768],
        output_len in prop_oneof![1u32..=16, 1u32..=4096],
        concurrency in proptest::collection::vec(prop_oneof![1u32..=64, 1u32..=8192], 1..6),
        e2e in any::<bool>(),
    ) {
        let sc = Scenario::new(&c.model, &c.system, c.par).unwrap();
        let w = Workload {
            input_len,
            output_len,
            tpot_def: if e2e { TpotDef::E2e } else { TpotDef::Itl },
            client: Default::default(),
        };
        let r = match sweep(&sc, &concurrency, w) {
            Ok(r) => r,
            // A configuration that cannot run is refused with its reason, never given a number.
            Err(e) if e.to_string().starts_with("does not fit:") => return Ok(()),
            Err(e) => panic!("sweep failed: {e}"),
        };
        assert_json_finite(
            &serde_json::to_value(&r).unwrap(),
            "sweep",
            common::ABSENT_BY_DESIGN,
        );
        prop_assert!(r.plateau_tok_s > 0.0);
        for p in &r.points {
            prop_assert!(p.throughput_tok_s > 0.0, "throughput {}", p.throughput_tok_s);
            prop_assert!(p.tpot_itl_ms > 0.0 && p.ttft_ms > 0.0 && p.e2e_ms > 0.0);
            // E2E = TTFT + (out − 1) × ITL, and TPOT(e2e) = E2E / out.
            let out = output_len.max(1) as f64;
            let e2e_ms = p.ttft_ms + (out - 1.0) * p.tpot_itl_ms;
            prop_assert!((p.e2e_ms - e2e_ms).abs() <= EPS * e2e_ms, "E2E {} != {e2e_ms}", p.e2e_ms);
            prop_assert!((p.tpot_e2e_ms * out - p.e2e_ms).abs() <= EPS * p.e2e_ms);
            // TPOT(e2e) ≥ TPOT(itl) exactly when TTFT ≥ ITL. Where prefill mixes with decode
            // the prompt rides at least one full step, so it holds. Where it does not, a short
            // prompt's prefill runs as a pass of its own and can be quicker than a
            // long-context decode step of the whole batch: TTFT < ITL is then physical, not an
            // error, and not asserted.
            if c.system.engine.mixes_prefill_with_decode() {
                prop_assert!(
                    p.tpot_e2e_ms >= p.tpot_itl_ms * (1.0 - EPS),
                    "C={}: TPOT e2e {} ms < itl {} ms (ttft {} ms, running {}, in {input_len} out {output_len})",
                    p.concurrency, p.tpot_e2e_ms, p.tpot_itl_ms, p.ttft_ms, p.running
                );
            }
            // The bound is of the TPOT reported: the decode step's under itl, with the
            // prompt's own prefill spread over the output under e2e.
            prop_assert!(p.sol_tpot_ms <= p.tpot_ms * (1.0 + EPS));
            if !e2e {
                prop_assert!(p.sol_tpot_ms <= p.decode_step_ms * (1.0 + EPS));
            }
        }
    }

    /// Speculative decoding: finite speedups; no acceptance never speeds anything up.
    #[test]
    fn specdec_is_finite_and_useless_without_acceptance(
        c in case(),
        draft_kind in 0u8..5,
        alpha in proptest::collection::vec(0.0f64..=1.0, 1..4),
        ks in proptest::collection::vec(1u32..=8, 1..4),
        concurrency in proptest::collection::vec(1u32..=1024, 1..4),
        ngram_us in 0.0f64..=500.0,
    ) {
        let sc = Scenario::new(&c.model, &c.system, c.par).unwrap();
        let draft = match draft_kind {
            0 if c.model.config.num_nextn_predict_layers.is_some() => Draft::Mtp,
            1 if c.model.eagle_head.is_some() => Draft::Eagle,
            4 if c.model.eagle_head.is_some() => Draft::Eagle3,
            2 => Draft::Model { spec: Box::new(c.model.clone()), tp: 1 },
            _ => Draft::Ngram { cpu_seconds: ngram_us * 1e-6 },
        };
        let r = match specdec(&sc, &draft, &Acceptance(alpha), &ks, &concurrency, c.context) {
            Ok(r) => r,
            // A draft the engine would refuse at this layout (block-FP8 widths split into
            // partial blocks) is refused with its reason, not given a number.
            Err(e) if e.to_string().contains("cannot run") => return Ok(()),
            // No concurrency fits in memory: refused with its reason, never given a number.
            Err(e) if e.to_string().starts_with("does not fit:") => return Ok(()),
            Err(e) => panic!("specdec failed: {e}"),
        };
        // Every concurrency is either evaluated or refused with its reason.
        for &c in &concurrency {
            let evaluated = r.points.iter().any(|p| p.concurrency == c);
            let refused = r.does_not_fit.iter().any(|(x, why)| *x == c && why.starts_with("does not fit:"));
            prop_assert!(evaluated != refused, "C={c}: evaluated {evaluated}, refused {refused}");
        }
        assert_json_finite(&serde_json::to_value(&r).unwrap(), "specdec", &[]);
        for p in &r.points {
            prop_assert!(p.speedup.is_finite() && p.speedup > 0.0, "speedup {}", p.speedup);
        }
        let r = specdec(&sc, &draft, &Acceptance(vec![0.0]), &ks, &concurrency, c.context).unwrap();
        for p in &r.points {
            prop_assert!(
                p.speedup <= 1.0 + EPS,
                "α=0, {} k={} C={}: speedup {}", draft.name(), p.k, p.concurrency, p.speedup
            );
        }
    }
}
