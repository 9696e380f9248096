//! The per-layer description of the newer families, read from their `config.json`: which
//! token mixer and which feed-forward each layer runs, the shapes of the recurrent mixers
//! (Gated DeltaNet, Mamba-2), the global-layer shapes of Gemma-4, DeepSeek-V4's compression,
//! multi-token-prediction layers and the vision encoder.
//!
//! Why it is apart from `config`: each family states its layer pattern its own way
//! (`layer_types`, `hybrid_override_pattern`, `attention_chunk_size` with NoPE layers every
//! fourth, DeciLM `block_configs`, `attn_type_list`), and rooftop writes all of them as one
//! per-layer list (`layer_types`, `mlp_layer_types`) so the model is data.

use super::config::{preview, Ctx, Family, Obj};
use crate::error::Result;
use crate::spec::model::{KvDtype, ModelConfig, VisionSpec};
use serde_json::Value;

/// Per-layer lists derived from a family's own fields.
#[derive(Default)]
pub(super) struct LayerKinds {
    /// Token mixer per layer, when the family states it other than by `layer_types`.
    pub layer_types: Option<Vec<String>>,
    /// Feed-forward per layer (`dense`, `sparse`, `none`) from a hybrid pattern.
    pub ffn_pattern: Option<Vec<String>>,
    pub layer_intermediate_sizes: Option<Vec<u32>>,
    pub layer_kv_heads: Option<Vec<u32>>,
    pub chunk: Option<u32>,
}

/// The family's per-layer pattern, where it is not a plain `layer_types` list.
pub(super) fn read_layer_kinds(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    layers: u32,
    warnings: &mut Vec<String>,
) -> Result<LayerKinds> {
    let mut k = LayerKinds::default();
    match family {
        Family::NemotronH => {
            let (blocks, field) = nemotron_blocks(cx, t)?;
            if blocks.len() != layers as usize {
                return Err(cx.invalid(
                    &field,
                    format!("one entry per layer ({layers}), got {}", blocks.len()),
                ));
            }
            let (mix, ffn) = blocks
                .iter()
                .map(|b| {
                    let (m, f) = match b {
                        'M' => ("mamba", "none"),
                        '*' => ("full_attention", "none"),
                        'E' => ("none", "sparse"),
                        _ => ("none", "dense"),
                    };
                    (m.to_string(), f.to_string())
                })
                .unzip();
            k.layer_types = Some(mix);
            k.ffn_pattern = Some(ffn);
            read_nemotron_mtp(cx, t, &blocks, warnings)?;
        }
        Family::Llama4 => {
            k.chunk = t.u32(cx, "attention_chunk_size")?;
            // Layers with RoPE attend within chunks; every fourth (NoPE) layer is global.
            let rope = match t.u32s(cx, "no_rope_layers")? {
                Some(v) if v.len() == layers as usize => v.iter().map(|x| *x != 0).collect(),
                _ => (0..layers).map(|i| (i + 1) % 4 != 0).collect::<Vec<bool>>(),
            };
            if k.chunk.is_some() {
                k.layer_types = Some(
                    rope.iter()
                        .map(|r| {
                            if *r {
                                "chunked_attention"
                            } else {
                                "full_attention"
                            }
                            .to_string()
                        })
                        .collect(),
                );
            }
        }
        Family::MiniMax => {
            if let Some(types) = t.u32s(cx, "attn_type_list")? {
                if types.contains(&0) {
                    return Err(cx.invalid(
                        &t.field("attn_type_list"),
                        "1 (softmax attention) for every layer: 0 marks a MiniMax-01/M1 lightning-attention layer, whose state layout (decay per head, block size) is not in config.json; rooftop would need its dimensions to cost it",
                    ));
                }
            }
        }
        Family::DeciLm => read_decilm(cx, t, layers, &mut k, warnings)?,
        _ => {}
    }
    Ok(k)
}

/// Nemotron-H's block kinds, one a layer, as pattern characters (M Mamba-2, * attention,
/// E MoE, - MLP), and the field they were read from. The modelling code states them as
/// `hybrid_override_pattern` (a string, the released configs) or, since transformers 5, as
/// `layers_block_type` (a list of `mamba`, `attention`, `moe`, `mlp`); the config class
/// converts one into the other, so a file with both must agree.
pub(super) fn nemotron_blocks(cx: &Ctx, t: &mut Obj) -> Result<(Vec<char>, String)> {
    blocks_of(cx, t, "hybrid_override_pattern", "layers_block_type")?.ok_or_else(|| {
        cx.missing(
            &t.field("hybrid_override_pattern"),
            "the per-layer pattern (M Mamba-2, * attention, E MoE, - MLP), or layers_block_type",
        )
    })
}

/// The block kinds under a pattern key or a list key (None: neither is given).
fn blocks_of(
    cx: &Ctx,
    t: &mut Obj,
    pattern_key: &str,
    list_key: &str,
) -> Result<Option<(Vec<char>, String)>> {
    let pf = t.field(pattern_key);
    let lf = t.field(list_key);
    let from_pattern = match t.get(pattern_key) {
        None => None,
        Some(Value::String(p)) => {
            if let Some(c) = p.chars().find(|c| !matches!(c, 'M' | '*' | 'E' | '-')) {
                return Err(cx.invalid(&pf, format!("M, *, E or - per layer, got '{c}'")));
            }
            Some(p.chars().collect::<Vec<char>>())
        }
        Some(v) => {
            return Err(cx.invalid(
                &pf,
                format!("a string, one character per layer, got {}", preview(v)),
            ))
        }
    };
    let from_list = match t.strings(cx, list_key)? {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| match n.as_str() {
                    "mamba" => Ok('M'),
                    "attention" => Ok('*'),
                    "moe" => Ok('E'),
                    "mlp" => Ok('-'),
                    other => Err(cx.invalid(
                        &lf,
                        format!("mamba, attention, moe or mlp per layer, got \"{other}\""),
                    )),
                })
                .collect::<Result<Vec<char>>>()?,
        ),
    };
    Ok(match (from_pattern, from_list) {
        (Some(p), Some(l)) if p != l => {
            return Err(cx.invalid(
                &lf,
                format!(
                    "the same layers as {pf} ({}), got {}",
                    p.iter().collect::<String>(),
                    l.iter().collect::<String>()
                ),
            ))
        }
        (Some(p), _) => Some((p, pf)),
        (None, Some(l)) => Some((l, lf)),
        (None, None) => None,
    })
}

/// Nemotron-3's MTP layers (`mtp_hybrid_override_pattern`, or `mtp_layers_block_type`):
/// rooftop counts each `num_nextn_predict_layers` layer as one full-attention layer with
/// the last decoder layer's feed-forward (`cost::memory::count_params`); Super's `*E`
/// (attention, then MoE, after an MoE last layer) is that shape. Another pattern is a
/// warning: the MTP weights are then approximate.
fn read_nemotron_mtp(
    cx: &Ctx,
    t: &mut Obj,
    blocks: &[char],
    warnings: &mut Vec<String>,
) -> Result<()> {
    let Some((mtp, field)) = blocks_of(
        cx,
        t,
        "mtp_hybrid_override_pattern",
        "mtp_layers_block_type",
    )?
    else {
        return Ok(());
    };
    let last_ffn = blocks.iter().rev().find(|c| matches!(c, 'E' | '-'));
    let modelled = mtp.len() == 2 && mtp[0] == '*' && Some(&mtp[1]) == last_ffn;
    if !modelled {
        warnings.push(format!(
            "{field} = \"{}\": rooftop counts an MTP layer as one attention block plus the last decoder layer's feed-forward; the MTP weights are approximate",
            mtp.iter().collect::<String>()
        ));
    }
    Ok(())
}

/// DeciLM `block_configs`: per layer, attention (`no_op`, `replace_with_linear`,
/// `n_heads_in_group`) and FFN (`no_op`, `replace_with_linear`, `ffn_mult`).
fn read_decilm(
    cx: &Ctx,
    t: &mut Obj,
    layers: u32,
    k: &mut LayerKinds,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let field = t.field("block_configs");
    let heads = t.u32(cx, "num_attention_heads")?.unwrap_or(1);
    let hidden = t.u32(cx, "hidden_size")?.unwrap_or(0) as f64;
    let Some(Value::Array(blocks)) = t.get("block_configs") else {
        return Err(cx.missing(&field, "the per-layer block descriptions"));
    };
    if blocks.len() != layers as usize {
        return Err(cx.invalid(
            &field,
            format!("one entry per layer ({layers}), got {}", blocks.len()),
        ));
    }
    let mut mix = Vec::new();
    let mut widths = Vec::new();
    let mut kv = Vec::new();
    let mut linear = 0;
    for b in blocks {
        let a = b.get("attention");
        let f = b.get("ffn");
        let flag = |o: Option<&Value>, key: &str| {
            o.and_then(|o| o.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let skip_attn = flag(a, "no_op") || flag(a, "replace_with_linear");
        linear += flag(a, "replace_with_linear") as u32 + flag(f, "replace_with_linear") as u32;
        mix.push(if skip_attn { "none" } else { "full_attention" }.to_string());
        let group = a
            .and_then(|a| a.get("n_heads_in_group"))
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as u32;
        kv.push((heads / group).max(1));
        let width = if flag(f, "no_op") || flag(f, "replace_with_linear") {
            0
        } else {
            let mult = f
                .and_then(|f| f.get("ffn_mult"))
                .and_then(Value::as_f64)
                .ok_or_else(|| {
                    cx.invalid(
                        &field,
                        format!("ffn.ffn_mult in every block, got {}", preview(b)),
                    )
                })?;
            // DeciLM's _ffn_mult_to_intermediate_size: 2/3 x mult x hidden, up to 256.
            let w = (2.0 * mult * hidden / 3.0) as u32;
            w.div_ceil(256) * 256
        };
        widths.push(width);
    }
    if linear > 0 {
        warnings.push(format!(
            "block_configs: {linear} attention/FFN block(s) are replace_with_linear (one hidden x hidden Linear); costed as absent"
        ));
    }
    k.layer_types = Some(mix);
    k.layer_intermediate_sizes = Some(widths);
    k.layer_kv_heads = Some(kv);
    Ok(())
}

/// Multi-token-prediction layers, under the family's key.
pub(super) fn read_mtp(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    _warnings: &mut [String],
) -> Result<Option<u32>> {
    Ok(match family {
        Family::Qwen35 => t.u32(cx, "mtp_num_hidden_layers")?,
        Family::MiniMax => {
            let on = t.bool(cx, "use_mtp")?.unwrap_or(false);
            let n = t.u32(cx, "num_mtp_modules")?;
            n.filter(|_| on)
        }
        _ => t.u32(cx, "num_nextn_predict_layers")?,
    })
}

fn state_dtype(v: Option<&Value>) -> Option<KvDtype> {
    match v.and_then(Value::as_str)? {
        "float32" | "fp32" => Some(KvDtype::Fp32),
        "bfloat16" | "bf16" => Some(KvDtype::Bf16),
        "float16" | "fp16" => Some(KvDtype::Fp16),
        _ => None,
    }
}

/// Shapes of the newer mixers and layer details, into `c`.
pub(super) fn read_mixer_dims(
    cx: &Ctx,
    family: Family,
    t: &mut Obj,
    c: &mut ModelConfig,
    warnings: &mut Vec<String>,
) -> Result<()> {
    c.linear_num_key_heads = t.u32(cx, "linear_num_key_heads")?;
    c.linear_num_value_heads = t.u32(cx, "linear_num_value_heads")?;
    c.linear_key_head_dim = t.u32(cx, "linear_key_head_dim")?;
    c.linear_value_head_dim = t.u32(cx, "linear_value_head_dim")?;
    c.linear_conv_kernel_dim = t.u32(cx, "linear_conv_kernel_dim")?;
    c.attn_output_gate = t.bool(cx, "attn_output_gate")?.unwrap_or(false);
    c.mamba_num_heads = t.u32(cx, "mamba_num_heads")?;
    c.mamba_head_dim = t.u32(cx, "mamba_head_dim")?;
    c.ssm_state_size = t.u32(cx, "ssm_state_size")?;
    c.n_groups = t.u32(cx, "n_groups")?;
    c.conv_kernel = t.u32(cx, "conv_kernel")?;
    for key in ["mamba_ssm_dtype", "mamba_ssm_cache_dtype"] {
        if let Some(d) = state_dtype(t.get(key)) {
            c.ssm_state_dtype = Some(d);
        }
    }
    if family == Family::NemotronH {
        c.mlp_hidden_act = t
            .get("mlp_hidden_act")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if family == Family::Gemma4 {
        c.global_head_dim = t.u32(cx, "global_head_dim")?;
        c.num_global_key_value_heads = t.u32(cx, "num_global_key_value_heads")?;
        c.attention_k_eq_v = t.bool(cx, "attention_k_eq_v")?.unwrap_or(false);
        for (key, what) in [
            (
                "num_kv_shared_layers",
                "layers that reuse an earlier layer's KV cache",
            ),
            (
                "hidden_size_per_layer_input",
                "per-layer input embeddings (Gemma-3n style)",
            ),
        ] {
            if let Some(n) = t.u32(cx, key)?.filter(|n| *n > 0) {
                warnings.push(format!(
                    "{}{key} = {n}: {what} are not modelled; weights and KV counted as if absent",
                    t.path
                ));
            }
        }
        t.get("vocab_size_per_layer_input");
        if t.bool(cx, "use_double_wide_mlp")?.unwrap_or(false) {
            warnings.push(format!(
                "{}use_double_wide_mlp = true: the doubled MLP width of shared-KV layers is not modelled",
                t.path
            ));
        }
    }
    if family == Family::DeepSeekV4 {
        c.o_lora_rank = t.u32(cx, "o_lora_rank")?;
        c.o_groups = t.u32(cx, "o_groups")?;
        c.compress_ratios = t.u32s(cx, "compress_ratios")?;
        if c.compress_ratios.is_none() {
            return Err(cx.missing(
                &t.field("compress_ratios"),
                "the per-layer KV compression ratios",
            ));
        }
        if t.get("hc_mult").is_some() {
            t.get("hc_eps");
            t.get("hc_sinkhorn_iters");
            warnings.push(format!(
                "{}hc_mult: hyper-connections (a residual stream of hc_mult x hidden) are left out: their mixing weights are a few hidden x hc_mult per layer; DeepSeek-V4 attention is built from config fields with the assumptions listed in ops::attention::compressed_ops",
                t.path
            ));
        }
    }
    c.indexer_types = t.strings(cx, "indexer_types")?;
    Ok(())
}

/// The vision encoder of a vision-language wrapper, where `vision_config` gives its sizes
/// (Qwen-VL `depth`/`num_heads`, Gemma/SigLIP `num_hidden_layers`/`num_attention_heads`).
/// None when a size is missing: the caller reports it as not modelled.
pub(super) fn read_vision(v: &Value, text_hidden: u32) -> Option<VisionSpec> {
    let u = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| v.get(*k).and_then(Value::as_u64))
            .map(|x| x as u32)
    };
    Some(VisionSpec {
        depth: u(&["depth", "num_hidden_layers"])?,
        hidden_size: u(&["hidden_size"])?,
        intermediate_size: u(&["intermediate_size"])?,
        num_heads: u(&["num_heads", "num_attention_heads"])?,
        patch_size: u(&["patch_size"])?,
        spatial_merge_size: u(&["spatial_merge_size", "pooling_kernel_size"]).unwrap_or(1),
        out_hidden_size: u(&["out_hidden_size"]).unwrap_or(text_hidden),
        temporal_patch_size: u(&["temporal_patch_size"]).unwrap_or(1),
        deepstack_mergers: v
            .get("deepstack_visual_indexes")
            .and_then(Value::as_array)
            .map_or(0, |a| a.len() as u32),
    })
}
