//! How a checkpoint stores its weights: the quantization descriptions Hugging Face
//! checkpoints ship, read into a rule per Linear module, then resolved to one storage format
//! per weight group (rooftop's `[quantization]` table) and the KV-cache element type.
//!
//! Why it is apart from the `config.json` reader: the shapes and the storage are described
//! by different producers (the modeling code vs. a quantization toolkit), with their own
//! pattern languages, and each toolkit's rules change on their own schedule.
//!
//! Quantization is resolved per weight group by naming the group's Linear modules (as the
//! Hugging Face modeling code names them, e.g. `model.layers.3.mlp.experts.0.gate_proj`; see
//! [`Layout::modules`]) and asking the scheme's target/ignore patterns about each one:
//! - compressed-tensors: the first `config_groups` entry whose `targets` match, unless the
//!   `ignore` list does (`re:` patterns are Python `re.match`, others are module or class
//!   names); its `weights` scheme gives the format (int4 group g → `int4-g{g}`, 8-bit float
//!   → `fp8` or `fp8-block128`, 8-bit int → `int8`, 4-bit float group 16 → `nvfp4`).
//! - `fp8` (DeepSeek-V3 style) and `fbgemm_fp8`: every decoder Linear not in
//!   `modules_to_not_convert` → `fp8-block128` (with `weight_block_size` [128, 128]) or `fp8`;
//!   embedding and lm_head BF16.
//! - ModelOpt (`hf_quant_config.json`, or `quant_method: "modelopt"`): `quant_algo` NVFP4 →
//!   `nvfp4`, FP8 → `fp8`, on every Linear not matched by `exclude_modules` (glob patterns);
//!   `MIXED_PRECISION` → each module's own `quant_algo` from `quantized_layers` (a module
//!   not listed is BF16), which rooftop then resolves per weight group like any other rule.
//! - `mxfp4` (gpt-oss): the routed experts → `mxfp4` unless in `modules_to_not_convert`.
//!
//! Routers and embeddings stay BF16 (rooftop's schema default); a group whose modules
//! disagree takes the majority format, with a warning. Touches no files: JSON values in,
//! formats and warnings out.

use super::config::{as_u32, parse_json, preview, Ctx, Layout, Obj};
use crate::error::Result;
use crate::spec::model::{KvDtype, QuantSpec, WeightFormat};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What the import learnt about storage.
pub(super) struct Storage<'a> {
    /// The `[quantization]` table.
    pub spec: QuantSpec,
    /// Where the formats came from and what each group resolved to, for `[sources]`.
    pub described: String,
    /// The label of a separate quantization file that was read (`hf_quant_config.json`).
    pub separate: Option<&'a str>,
}

/// The quantization of a checkpoint: a separate file (`quant_text`, `(text, label)`) wins;
/// else `quantization_config` in `text_config` or at the top level. `kv_cache_dtype`, where
/// given, overrides the scheme's KV-cache type.
pub(super) fn read_quantization<'a>(
    cx: &Ctx,
    t: &mut Obj,
    top: &mut Obj,
    quant_text: Option<(&str, &'a str)>,
    layout: &Layout,
    warnings: &mut Vec<String>,
) -> Result<Storage<'a>> {
    let nested = !t.path.is_empty();
    let in_text = if nested {
        t.get("quantization_config")
    } else {
        None
    };
    let at_top = top.get("quantization_config");
    let kv_top = t
        .get("kv_cache_dtype")
        .or_else(|| top.get("kv_cache_dtype"));
    let scheme = match quant_text {
        Some((qt, ql)) => {
            let v = parse_json(qt, ql)?;
            if let Some(q) = in_text.or(at_top) {
                let m = q.get("quant_method").and_then(Value::as_str).unwrap_or("?");
                if m != "modelopt" {
                    warnings.push(format!(
                        "{ql} given: the quantization_config in {} (quant_method \"{m}\") was not used",
                        cx.label
                    ));
                }
            }
            let qcx = Ctx {
                label: ql,
                text: qt,
                arch: cx.arch.clone(),
            };
            parse_scheme(&qcx, &v, "", warnings)?
        }
        None => match (in_text, at_top) {
            (Some(inner), outer) => {
                if outer.is_some() {
                    warnings.push(
                        "quantization_config appears both at the top level and in text_config; used text_config's"
                            .into(),
                    );
                }
                parse_scheme(cx, inner, "text_config.quantization_config", warnings)?
            }
            (None, Some(outer)) => parse_scheme(cx, outer, "quantization_config", warnings)?,
            (None, None) => Scheme::none(),
        },
    };
    let mut kv_cache = scheme.kv_cache;
    if let Some(v) = kv_top {
        kv_cache = kv_dtype_named(v, warnings);
    }
    let (spec, per_group) = resolve_quant(&scheme, layout, kv_cache, warnings);
    Ok(Storage {
        spec,
        described: scheme.describe(&per_group, kv_cache),
        separate: quant_text.map(|(_, ql)| ql),
    })
}

/// DeepSeek-V4's `expert_dtype`: the routed experts stored apart from the scheme of the
/// other Linear layers. `"fp4"` with `scale_fmt` ue8m0 is e2m1 with one E8M0 scale per 32
/// weights: rooftop's `mxfp4`.
pub(super) fn expert_dtype(
    cx: &Ctx,
    t: &mut Obj,
    storage: &mut Storage,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let Some(v) = t.get("expert_dtype") else {
        return Ok(());
    };
    let f = match v.as_str() {
        Some("fp4") | Some("mxfp4") => parse_fmt("mxfp4"),
        Some("fp8") => parse_fmt("fp8-block128"),
        Some("bf16") | Some("bfloat16") => WeightFormat::BF16,
        _ => {
            return Err(cx.invalid(
                &t.field("expert_dtype"),
                format!("fp4, fp8 or bf16, got {}", preview(v)),
            ))
        }
    };
    if f.kind == crate::spec::FormatKind::Mxfp4 {
        warnings.push(format!(
            "{}expert_dtype = \"fp4\": routed experts read as mxfp4 (e2m1 + one E8M0 scale per 32 weights)",
            t.path
        ));
    }
    storage.spec.routed_experts = Some(f).filter(|f| *f != storage.spec.default);
    storage.described = format!("{}; routed experts {f} (expert_dtype)", storage.described);
    Ok(())
}

/// Weight groups rooftop stores one format for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Group {
    Attention,
    DenseMlp,
    SharedExperts,
    RoutedExperts,
    LmHead,
}

impl Group {
    fn name(self) -> &'static str {
        match self {
            Group::Attention => "attention",
            Group::DenseMlp => "dense MLP",
            Group::SharedExperts => "shared experts",
            Group::RoutedExperts => "routed experts",
            Group::LmHead => "lm_head",
        }
    }
}

/// A module-name pattern from a target, ignore or exclude list.
#[derive(Debug, Clone)]
enum Pattern {
    /// `re:...`: Python `re.match` (anchored at the start) against the module name.
    Regex(Regex),
    /// A glob (`*`, `?`) matched in full against the module or one of its parents.
    Glob(Regex),
    /// A class name such as `Linear` (every module rooftop names is a Linear layer).
    Class(String),
    /// A dotted name matching the module, a parent, or a suffix at a `.` boundary.
    Name(String),
}

impl Pattern {
    fn parse(p: &str, cx: &Ctx, field: &str) -> Result<Pattern> {
        if let Some(r) = p.strip_prefix("re:") {
            return Regex::new(&format!("^(?:{r})"))
                .map(Pattern::Regex)
                .map_err(|e| {
                    cx.invalid(
                        field,
                        format!("regular expressions rooftop can read; \"{p}\" is not ({e})"),
                    )
                });
        }
        if p.contains(['*', '?']) {
            let mut s = String::from("^");
            for c in p.chars() {
                match c {
                    '*' => s.push_str(".*"),
                    '?' => s.push('.'),
                    c => s.push_str(&regex::escape(&c.to_string())),
                }
            }
            s.push('$');
            return Regex::new(&s)
                .map(Pattern::Glob)
                .map_err(|e| cx.invalid(field, format!("glob patterns; \"{p}\" is not ({e})")));
        }
        if !p.contains('.') && p.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Ok(Pattern::Class(p.to_string()));
        }
        Ok(Pattern::Name(p.to_string()))
    }

    fn matches(&self, module: &str) -> bool {
        match self {
            Pattern::Regex(r) => r.is_match(module),
            Pattern::Glob(r) => {
                r.is_match(module)
                    || module
                        .match_indices('.')
                        .any(|(i, _)| r.is_match(&module[..i]))
            }
            Pattern::Class(c) => c == "Linear",
            Pattern::Name(n) => format!(".{module}.").contains(&format!(".{n}.")),
        }
    }
}

fn patterns(cx: &Ctx, v: Option<&Value>, field: &str) -> Result<Vec<Pattern>> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x.as_str() {
                Some(s) => Pattern::parse(s, cx, field),
                None => Err(cx.invalid(field, format!("a list of module names, got {x}"))),
            })
            .collect(),
        Some(Value::String(s)) => Ok(vec![Pattern::parse(s, cx, field)?]),
        Some(x) => Err(cx.invalid(field, format!("a list of module names, got {}", preview(x)))),
    }
}

/// How a checkpoint stores its weights, as far as rooftop needs to know.
struct Scheme {
    rule: Rule,
    kv_cache: KvDtype,
    /// One line on where the formats came from, for `[sources]`.
    summary: String,
}

enum Rule {
    /// Unquantized.
    None,
    /// Every Linear not excluded gets `format`; lm_head too unless `lm_head_bf16`.
    AllLinear {
        format: WeightFormat,
        exclude: Vec<Pattern>,
        lm_head_bf16: bool,
    },
    /// Only the routed experts are converted.
    ExpertsOnly {
        format: WeightFormat,
        exclude: Vec<Pattern>,
    },
    /// ModelOpt `MIXED_PRECISION`: each module's own format from `quantized_layers`, keyed
    /// by module name (a key may name the module or a module holding it, e.g. a fused
    /// `mlp.experts`); a module not listed, or matched by `exclude`, stays BF16.
    PerModule {
        layers: BTreeMap<String, WeightFormat>,
        exclude: Vec<Pattern>,
    },
    /// compressed-tensors: the first group whose targets match, unless ignored.
    Groups {
        groups: Vec<(Vec<Pattern>, WeightFormat)>,
        ignore: Vec<Pattern>,
    },
}

impl Scheme {
    fn none() -> Scheme {
        Scheme {
            rule: Rule::None,
            kv_cache: KvDtype::Bf16,
            summary: "no quantization_config: weights BF16 as shipped".into(),
        }
    }

    fn format_of(&self, g: Group, module: &str) -> WeightFormat {
        let excluded = |ps: &[Pattern]| ps.iter().any(|p| p.matches(module));
        match &self.rule {
            Rule::None => WeightFormat::BF16,
            Rule::AllLinear {
                format,
                exclude,
                lm_head_bf16,
            } => {
                if (g == Group::LmHead && *lm_head_bf16) || excluded(exclude) {
                    WeightFormat::BF16
                } else {
                    *format
                }
            }
            Rule::ExpertsOnly { format, exclude } => {
                if g == Group::RoutedExperts && !excluded(exclude) {
                    *format
                } else {
                    WeightFormat::BF16
                }
            }
            Rule::PerModule { layers, exclude } => {
                if excluded(exclude) {
                    return WeightFormat::BF16;
                }
                // The module itself, then the modules holding it, nearest first.
                let parents = module.rmatch_indices('.').map(|(i, _)| &module[..i]);
                std::iter::once(module)
                    .chain(parents)
                    .find_map(|m| layers.get(m).copied())
                    .unwrap_or(WeightFormat::BF16)
            }
            Rule::Groups { groups, ignore } => {
                if excluded(ignore) {
                    return WeightFormat::BF16;
                }
                groups
                    .iter()
                    .find(|(targets, _)| excluded(targets))
                    .map(|(_, f)| *f)
                    .unwrap_or(WeightFormat::BF16)
            }
        }
    }

    fn describe(&self, per_group: &BTreeMap<Group, WeightFormat>, kv: KvDtype) -> String {
        let groups: Vec<String> = per_group
            .iter()
            .map(|(g, f)| format!("{} {f}", g.name()))
            .collect();
        format!(
            "{}; resolved per weight group: {}, embedding and router bf16; kv_cache {}",
            self.summary,
            groups.join(", "),
            kv_name(kv)
        )
    }
}

fn kv_name(k: KvDtype) -> &'static str {
    match k {
        KvDtype::Bf16 => "bf16",
        KvDtype::Fp16 => "fp16",
        KvDtype::Fp32 => "fp32",
        KvDtype::Fp8 => "fp8",
    }
}

/// A KV dtype given by name (`kv_cache_dtype`, ModelOpt's `kv_cache_quant_algo`).
fn kv_dtype_named(v: &Value, warnings: &mut Vec<String>) -> KvDtype {
    let s = v.as_str().unwrap_or("").to_ascii_lowercase();
    match s.as_str() {
        "" | "auto" | "bf16" | "bfloat16" => KvDtype::Bf16,
        "fp16" | "float16" | "half" => KvDtype::Fp16,
        x if x.starts_with("fp8") || x == "int8" => KvDtype::Fp8,
        _ => {
            warnings.push(format!(
                "KV-cache dtype {v} is not one rooftop models (bf16, fp16, fp8); used bf16"
            ));
            KvDtype::Bf16
        }
    }
}

fn parse_fmt(s: &str) -> WeightFormat {
    s.parse().expect("built-in format string")
}

/// The dotted name of field `k` of the object at `path` ("" for a file's top level).
fn field_in(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Read a quantization description: `config.json`'s `quantization_config` (at `path`), or a
/// ModelOpt `hf_quant_config.json` (path "").
fn parse_scheme(cx: &Ctx, v: &Value, path: &str, warnings: &mut Vec<String>) -> Result<Scheme> {
    let f = |k: &str| field_in(path, k);
    let m = v.as_object().ok_or_else(|| {
        cx.invalid(
            &f("quant_method"),
            "a quantization description (a JSON object)",
        )
    })?;
    // hf_quant_config.json: {"producer": ..., "quantization": {"quant_algo": ...}}
    if let Some(Value::Object(q)) = m.get("quantization") {
        return modelopt(cx, q, &f("quantization"), warnings);
    }
    let method = m
        .get("quant_method")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            cx.invalid(
                &f("quant_method"),
                "the quantization method (compressed-tensors, fp8, fbgemm_fp8, modelopt, mxfp4, gptq, awq)",
            )
        })?;
    match method {
        "compressed-tensors" => compressed_tensors(cx, m, path, warnings),
        "fp8" | "fbgemm_fp8" => {
            let block = m.get("weight_block_size").filter(|b| !b.is_null());
            let dims = block.map(|b| {
                b.as_array()
                    .map(|a| a.iter().map(as_u32).collect::<Vec<_>>())
                    .unwrap_or_default()
            });
            // A block of 0 (or no two dimensions) is no block size: one scale per no weights.
            if let Some(d) = &dims {
                if d.len() != 2 || d.iter().any(|x| x.is_none_or(|x| x == 0)) {
                    return Err(cx.invalid(
                        &f("weight_block_size"),
                        format!(
                            "two positive block dimensions, e.g. [128, 128], got {}",
                            preview(block.unwrap_or(&Value::Null))
                        ),
                    ));
                }
            }
            let format = match dims {
                None => parse_fmt("fp8"),
                Some(b) if b == [Some(128), Some(128)] => parse_fmt("fp8-block128"),
                Some(_) => {
                    warnings.push(format!(
                        "{} = {}: rooftop knows 128x128 blocks only; used fp8 without scale bytes",
                        f("weight_block_size"),
                        preview(block.unwrap_or(&Value::Null))
                    ));
                    parse_fmt("fp8")
                }
            };
            let mut exclude = patterns(cx, m.get("modules_to_not_convert"), &f("modules_to_not_convert"))?;
            exclude.extend(patterns(cx, m.get("ignored_layers"), &f("ignored_layers"))?);
            let kv = match m.get("kv_cache_dtype") {
                Some(k) => kv_dtype_named(k, warnings),
                None => KvDtype::Bf16,
            };
            Ok(Scheme {
                rule: Rule::AllLinear {
                    format,
                    exclude,
                    lm_head_bf16: true,
                },
                kv_cache: kv,
                summary: format!(
                    "{} quant_method \"{method}\"{}: {format} on the decoder's Linear layers not in modules_to_not_convert; lm_head and embedding BF16",
                    cx.label,
                    block.map(|b| format!(", weight_block_size {b}")).unwrap_or_default()
                ),
            })
        }
        "modelopt" => modelopt(cx, m, path, warnings),
        "gptq" | "awq" => gptq_awq(cx, m, method, path, warnings),
        "mxfp4" => {
            let exclude = patterns(cx, m.get("modules_to_not_convert"), &f("modules_to_not_convert"))?;
            Ok(Scheme {
                rule: Rule::ExpertsOnly {
                    format: parse_fmt("mxfp4"),
                    exclude,
                },
                kv_cache: KvDtype::Bf16,
                summary: format!(
                    "{} quant_method \"mxfp4\": routed experts MXFP4 (e2m1 + one 8-bit scale per 32 weights) unless in modules_to_not_convert; everything else BF16",
                    cx.label
                ),
            })
        }
        other => Err(cx.invalid(
            &f("quant_method"),
            format!(
                "a quantization method rooftop can import (compressed-tensors, fp8, fbgemm_fp8, modelopt, mxfp4, gptq, awq); got \"{other}\""
            ),
        )),
    }
}

/// GPTQ and AWQ: `bits`-bit integer weights with a scale per `group_size` (-1: one per
/// output channel) on every decoder Linear not in `modules_to_not_convert`; lm_head BF16.
/// Asymmetric groups (`sym: false`, AWQ's `zero_point: true`) add a packed zero point per
/// group; `desc_act` (GPTQ act-order) reorders the input channels and stores one index per
/// input channel, which does not change the bytes read per weight.
fn gptq_awq(
    cx: &Ctx,
    m: &Map<String, Value>,
    method: &str,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let f = |k: &str| field_in(path, k);
    let bits = m
        .get("bits")
        .or_else(|| m.get("w_bit"))
        .and_then(as_u32)
        .ok_or_else(|| cx.invalid(&f("bits"), "the weight bit width (4 or 8)"))?;
    let group_key = if m.contains_key("group_size") {
        "group_size"
    } else {
        "q_group_size"
    };
    let group = match m.get(group_key).filter(|g| !g.is_null()) {
        None => 128,
        // -1 is one scale per output channel; 0 or another negative is no group size.
        Some(g) => match g.as_i64() {
            Some(g) if g > 0 || g == -1 => g,
            _ => {
                return Err(cx.invalid(
                    &f(group_key),
                    format!(
                        "a positive group size (e.g. 128), or -1 for one scale per output channel, got {}",
                        preview(g)
                    ),
                ))
            }
        },
    };
    let zero = match method {
        "awq" => m.get("zero_point").and_then(Value::as_bool).unwrap_or(true),
        _ => !m.get("sym").and_then(Value::as_bool).unwrap_or(true),
    };
    let format = match (bits, group) {
        (4, g) if g > 0 => WeightFormat {
            kind: crate::spec::FormatKind::Int4,
            group_size: g as u32,
            scale_bits: if zero { 16 + 4 } else { 16 },
        },
        (4, _) => WeightFormat {
            kind: crate::spec::FormatKind::Int4,
            group_size: 0,
            scale_bits: 0,
        },
        (8, _) => parse_fmt("int8"),
        _ => {
            return Err(cx.invalid(
                &f("bits"),
                format!("4 or 8 bits (the integer formats rooftop models), got {bits}"),
            ))
        }
    };
    if m.get("desc_act").and_then(Value::as_bool).unwrap_or(false) {
        warnings.push(format!(
            "{}: desc_act (act-order) reorders input channels; the kernel gathers them, the bytes per weight are unchanged",
            f("desc_act")
        ));
    }
    let exclude = patterns(
        cx,
        m.get("modules_to_not_convert"),
        &f("modules_to_not_convert"),
    )?;
    Ok(Scheme {
        rule: Rule::AllLinear {
            format,
            exclude,
            lm_head_bf16: true,
        },
        kv_cache: KvDtype::Bf16,
        summary: format!(
            "{} quant_method \"{method}\": {bits}-bit integer weights, group size {group}{}, on the decoder's Linear layers not in modules_to_not_convert; lm_head and embedding BF16",
            cx.label,
            if zero { " with zero points" } else { "" }
        ),
    })
}

/// ModelOpt: `quant_algo` on every Linear not in `exclude_modules` (or `ignore`); for
/// `MIXED_PRECISION`, each module's own `quant_algo` from `quantized_layers`.
fn modelopt(
    cx: &Ctx,
    q: &Map<String, Value>,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let f = |k: &str| field_in(path, k);
    let algo = q.get("quant_algo").and_then(Value::as_str).ok_or_else(|| {
        cx.invalid(
            &f("quant_algo"),
            "ModelOpt's quantization algorithm (NVFP4, FP8, MIXED_PRECISION, ...)",
        )
    })?;
    let mut exclude = patterns(cx, q.get("exclude_modules"), &f("exclude_modules"))?;
    exclude.extend(patterns(cx, q.get("ignore"), &f("ignore"))?);
    let kv_cache = match (q.get("kv_cache_quant_algo"), q.get("kv_cache_scheme")) {
        (Some(k), _) if !k.is_null() => kv_dtype_named(k, warnings),
        (_, Some(s)) if !s.is_null() => kv_scheme(s, warnings),
        _ => KvDtype::Bf16,
    };
    if algo.eq_ignore_ascii_case("MIXED_PRECISION") {
        return modelopt_mixed(cx, q, path, exclude, kv_cache, warnings);
    }
    let format = modelopt_format(cx, algo, q.get("group_size"), &f("quant_algo"), warnings)?;
    Ok(Scheme {
        rule: Rule::AllLinear {
            format,
            exclude,
            lm_head_bf16: false,
        },
        kv_cache,
        summary: format!(
            "{} ModelOpt quant_algo \"{algo}\": {format} on every Linear layer not matched by exclude_modules",
            cx.label
        ),
    })
}

/// ModelOpt's per-layer algorithm names (`modelopt.torch.export`'s `QUANTIZATION_*`) as
/// rooftop formats: the bytes of a stored weight, whatever the activations run in.
/// `NVFP4` and its weight-only / AWQ forms are e2m1 + one FP8 scale per 16; the FP8 forms
/// are e4m3 (`FP8_PB_WO`, per block, with a 128 x 128 block when `group_size` says 128);
/// `W4A16_AWQ` / `W4A8_AWQ` are INT4 with a scale per `group_size` (default 128); the
/// 8-bit SmoothQuant forms are INT8; `UNQUANTIZED` stays BF16.
fn modelopt_format(
    cx: &Ctx,
    algo: &str,
    group: Option<&Value>,
    field: &str,
    warnings: &mut Vec<String>,
) -> Result<WeightFormat> {
    // A group of no weights is no scale layout: refused, never read as per-channel (-1 is
    // the per-channel spelling).
    if let Some(g) = group.filter(|g| !g.is_null() && g.as_i64() != Some(-1)) {
        if as_u32(g).is_none_or(|g| g == 0) {
            let group_field = match field.rsplit_once('.') {
                Some((parent, _)) => format!("{parent}.group_size"),
                None => "group_size".to_string(),
            };
            return Err(cx.invalid(
                &group_field,
                format!("a positive group size (NVFP4's is 16), got {}", preview(g)),
            ));
        }
    }
    let group = group.and_then(as_u32);
    let a = algo.to_ascii_uppercase();
    Ok(match a.as_str() {
        "NVFP4" | "W4A16_NVFP4" | "NVFP4_AWQ" | "W4A8_NVFP4_FP8" => {
            if let Some(g) = group.filter(|g| *g != 16) {
                warnings.push(format!(
                    "{field} \"{algo}\" with group_size {g}: NVFP4 in rooftop has one scale per 16 weights"
                ));
            }
            parse_fmt("nvfp4")
        }
        "FP8" | "FP8_PER_CHANNEL_PER_TOKEN" | "W8A8_FP8" | "FP8_PB_WO" | "FP8_PB" => {
            if a.starts_with("FP8_PB") && group == Some(128) {
                parse_fmt("fp8-block128")
            } else {
                parse_fmt("fp8")
            }
        }
        "MXFP4" | "W4A16_MXFP4" | "W4A8_MXFP4_FP8" => parse_fmt("mxfp4"),
        "W4A16_AWQ" | "W4A8_AWQ" | "INT4_AWQ" => {
            parse_fmt(&format!("int4-g{}", group.filter(|g| *g > 0).unwrap_or(128)))
        }
        "INT8_SQ" | "W8A8_SQ_PER_CHANNEL" | "W8A8_SQ_PER_CHANNEL_PER_TOKEN_DYNAMIC" | "INT8_WO" => {
            parse_fmt("int8")
        }
        "UNQUANTIZED" | "NONE" => WeightFormat::BF16,
        _ => {
            return Err(cx.invalid(
                field,
                format!(
                    "a ModelOpt algorithm rooftop can import (NVFP4, W4A16_NVFP4, FP8, FP8_PB_WO, MXFP4, W4A16_AWQ, W4A8_AWQ, INT8_SQ, UNQUANTIZED, or MIXED_PRECISION with quantized_layers); got \"{algo}\""
                ),
            ))
        }
    })
}

/// ModelOpt `MIXED_PRECISION` (the DeepSeek-V4, Qwen3.6 and Nemotron-3 Super NVFP4
/// releases): `quantized_layers` maps module names to `{"quant_algo", "group_size"}`, and
/// every Linear it does not name is unquantized (vLLM's `ModelOptMixedPrecisionConfig`).
/// A config.json without the map but with compressed-tensors style `config_groups` (the
/// same modules as target lists) is read through those.
fn modelopt_mixed(
    cx: &Ctx,
    q: &Map<String, Value>,
    path: &str,
    exclude: Vec<Pattern>,
    kv_cache: KvDtype,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let field = field_in(path, "quantized_layers");
    let map = match q.get("quantized_layers") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) if q.contains_key("config_groups") => {
            let mut s = compressed_tensors(cx, q, path, warnings)?;
            s.kv_cache = kv_cache;
            s.summary = format!(
                "{} ModelOpt quant_algo \"MIXED_PRECISION\" without quantized_layers, read from its config_groups: {}",
                cx.label, s.summary
            );
            return Ok(s);
        }
        Some(v) => {
            return Err(cx.invalid(
                &field,
                format!(
                    "an object mapping module names to {{\"quant_algo\": ...}}, got {}",
                    preview(v)
                ),
            ))
        }
        None => {
            return Err(cx.missing(
                &field,
                "the per-module formats of a MIXED_PRECISION checkpoint",
            ))
        }
    };
    let mut layers = BTreeMap::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (module, entry) in map {
        let ef = format!("{field}.{module}");
        let algo = entry
            .get("quant_algo")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                cx.invalid(
                    &ef,
                    format!(
                        "an object with the module's quant_algo, got {}",
                        preview(entry)
                    ),
                )
            })?;
        let fmt = modelopt_format(cx, algo, entry.get("group_size"), &ef, warnings)?;
        *counts.entry(fmt.to_string()).or_default() += 1;
        layers.insert(module.clone(), fmt);
    }
    let listed: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
    Ok(Scheme {
        rule: Rule::PerModule { layers, exclude },
        kv_cache,
        summary: format!(
            "{} ModelOpt quant_algo \"MIXED_PRECISION\": each module's format from quantized_layers ({} modules: {}); modules not listed, or matched by exclude_modules, BF16",
            cx.label,
            map.len(),
            listed.join(", ")
        ),
    })
}

/// compressed-tensors `kv_cache_scheme`.
fn kv_scheme(s: &Value, warnings: &mut Vec<String>) -> KvDtype {
    let bits = s.get("num_bits").and_then(as_u32);
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    match (bits, ty) {
        (Some(8), "float") => KvDtype::Fp8,
        (Some(8), _) => {
            warnings.push(format!(
                "kv_cache_scheme {}: 8-bit non-float KV read as fp8 (same bytes)",
                preview(s)
            ));
            KvDtype::Fp8
        }
        (Some(16), _) => KvDtype::Bf16,
        _ => {
            warnings.push(format!(
                "kv_cache_scheme {} is not one rooftop models (8-bit float); used bf16",
                preview(s)
            ));
            KvDtype::Bf16
        }
    }
}

fn compressed_tensors(
    cx: &Ctx,
    m: &Map<String, Value>,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Scheme> {
    let f = |k: &str| format!("{path}.{k}");
    let cfg_groups = match m.get("config_groups") {
        Some(Value::Object(g)) => g,
        _ => {
            return Err(cx.missing(
                &f("config_groups"),
                "compressed-tensors' quantization groups (targets and weight scheme)",
            ))
        }
    };
    let mut groups = Vec::new();
    let mut summary = Vec::new();
    for (gname, g) in cfg_groups {
        let gf = f(&format!("config_groups.{gname}"));
        let targets = patterns(cx, g.get("targets"), &format!("{gf}.targets"))?;
        let Some(w) = g.get("weights").filter(|w| !w.is_null()) else {
            continue; // activation-only group: weights stay as they are
        };
        let fmt = ct_weight_format(cx, w, &format!("{gf}.weights"), warnings)?;
        let t: Vec<String> = g
            .get("targets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        summary.push(format!("{gname} {fmt} on {}", t.join(", ")));
        groups.push((targets, fmt));
    }
    let ignore = patterns(cx, m.get("ignore"), &f("ignore"))?;
    let kv_cache = match m.get("kv_cache_scheme") {
        Some(s) if !s.is_null() => kv_scheme(s, warnings),
        _ => KvDtype::Bf16,
    };
    let format = m.get("format").and_then(Value::as_str).unwrap_or("?");
    let ignored: Vec<&str> = m
        .get("ignore")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Ok(Scheme {
        rule: Rule::Groups { groups, ignore },
        kv_cache,
        summary: format!(
            "{} compressed-tensors ({format}): {}; ignore [{}] stays BF16",
            cx.label,
            summary.join("; "),
            ignored.join(", ")
        ),
    })
}

/// A compressed-tensors weight scheme as a rooftop format.
fn ct_weight_format(
    cx: &Ctx,
    w: &Value,
    field: &str,
    warnings: &mut Vec<String>,
) -> Result<WeightFormat> {
    let bits = w.get("num_bits").and_then(as_u32);
    let ty = w.get("type").and_then(Value::as_str).unwrap_or("int");
    let strategy = w
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("tensor");
    let group = w.get("group_size").and_then(as_u32);
    let symmetric = w.get("symmetric").and_then(Value::as_bool).unwrap_or(true);
    let unsupported = || {
        cx.invalid(
            field,
            format!(
                "a weight scheme rooftop can import (int4 group-scaled, 8-bit float, 8-bit int, 4-bit float group 16); got {}",
                preview(w)
            ),
        )
    };
    let fmt = match (bits, ty) {
        (Some(4), "int") => match (strategy, group) {
            ("group", Some(g)) if g > 0 => parse_fmt(&format!("int4-g{g}")),
            _ => return Err(unsupported()),
        },
        (Some(8), "float") => {
            let block = w
                .get("block_structure")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(as_u32).collect::<Vec<_>>());
            match (strategy, block) {
                ("block", Some(b)) if b == [Some(128), Some(128)] => parse_fmt("fp8-block128"),
                ("block", Some(b))
                    if b.len() != 2 || b.iter().any(|x| x.is_none_or(|x| x == 0)) =>
                {
                    return Err(cx.invalid(
                        &format!("{field}.block_structure"),
                        format!(
                            "two positive block dimensions, e.g. [128, 128], got {}",
                            preview(w.get("block_structure").unwrap_or(&Value::Null))
                        ),
                    ))
                }
                ("block", _) => {
                    warnings.push(format!(
                        "{field}: FP8 block structure other than 128x128; used fp8 without scale bytes"
                    ));
                    parse_fmt("fp8")
                }
                _ => parse_fmt("fp8"),
            }
        }
        (Some(8), "int") => parse_fmt("int8"),
        (Some(4), "float") => match group {
            Some(16) => parse_fmt("nvfp4"),
            Some(32) => parse_fmt("mxfp4"),
            _ => return Err(unsupported()),
        },
        _ => return Err(unsupported()),
    };
    if !symmetric && ty == "int" {
        warnings.push(format!(
            "{field}: asymmetric (zero points); rooftop counts the scales only"
        ));
    }
    Ok(fmt)
}

/// Formats per group → the compact `[quantization]` table: `default` is the format most
/// groups share (ties: attention's), the others are named.
fn resolve_quant(
    scheme: &Scheme,
    layout: &Layout,
    kv: KvDtype,
    warnings: &mut Vec<String>,
) -> (QuantSpec, BTreeMap<Group, WeightFormat>) {
    let mut per: BTreeMap<Group, WeightFormat> = BTreeMap::new();
    for g in [
        Group::Attention,
        Group::DenseMlp,
        Group::SharedExperts,
        Group::RoutedExperts,
        Group::LmHead,
    ] {
        let mods = layout.modules(g);
        if mods.is_empty() {
            continue;
        }
        let mut counts: Vec<(WeightFormat, usize)> = Vec::new();
        for m in &mods {
            let f = scheme.format_of(g, m);
            match counts.iter_mut().find(|(x, _)| *x == f) {
                Some(c) => c.1 += 1,
                None => counts.push((f, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        if counts.len() > 1 {
            let parts: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
            warnings.push(format!(
                "{}: its Linear layers are stored in more than one format ({} of {} checked); rooftop stores one format per group: used {}",
                g.name(),
                parts.join(", "),
                mods.len(),
                counts[0].0
            ));
        }
        per.insert(g, counts[0].0);
    }
    let attention = per[&Group::Attention];
    let decoder: Vec<WeightFormat> = per
        .iter()
        .filter(|(g, _)| **g != Group::LmHead)
        .map(|(_, f)| *f)
        .collect();
    let mut default = attention;
    let mut best = decoder.iter().filter(|f| **f == attention).count();
    for f in &decoder {
        let n = decoder.iter().filter(|x| *x == f).count();
        if n > best {
            best = n;
            default = *f;
        }
    }
    let named = |g: Group| per.get(&g).copied().filter(|f| *f != default);
    let q = QuantSpec {
        default,
        attention: named(Group::Attention),
        dense_mlp: named(Group::DenseMlp),
        shared_experts: named(Group::SharedExperts),
        routed_experts: named(Group::RoutedExperts),
        lm_head: per
            .get(&Group::LmHead)
            .copied()
            .filter(|f| *f != WeightFormat::BF16),
        embedding: None,
        router: None,
        kv_cache: kv,
    };
    (q, per)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::llama;
    use super::super::import;
    use super::*;
    use crate::spec::FormatKind;

    fn cx() -> Ctx<'static> {
        Ctx {
            label: "t.json",
            text: "",
            arch: "X".into(),
        }
    }

    #[test]
    fn patterns_follow_regex_glob_and_name_rules() {
        let c = cx();
        let p = |s: &str| Pattern::parse(s, &c, "ignore").unwrap();
        let m = "language_model.model.layers.0.mlp.gate_proj";
        assert!(p("re:.*layers\\.0\\.mlp.*").matches(m));
        assert!(
            !p("re:layers\\.0").matches(m),
            "re: is anchored at the start"
        );
        assert!(p("*.layers.*.mlp*").matches(m));
        assert!(p("model.layers.0.mlp").matches("model.layers.0.mlp.up_proj"));
        assert!(!p("model.layers.*.mlp.gate").matches("model.layers.0.mlp.gate_proj"));
        assert!(p("lm_head").matches("language_model.lm_head"));
        assert!(!p("lm_head").matches("model.lm_head_extra"));
        assert!(p("Linear").matches(m));
        assert!(Pattern::parse("re:(", &c, "ignore").is_err());
    }

    #[test]
    fn modelopt_in_config_json_and_fp8_kv() {
        let q = r#", "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
            "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        let qs = &i.model.quantization;
        assert_eq!(qs.dense_mlp().kind, FormatKind::Nvfp4);
        assert_eq!(qs.attention(), WeightFormat::BF16);
        assert_eq!(qs.lm_head(), WeightFormat::BF16);
        assert_eq!(qs.kv_cache, KvDtype::Fp8);
    }

    #[test]
    fn quantization_config_at_top_level_of_a_nested_config() {
        let text = r#"{"architectures": ["KimiVLForConditionalGeneration"],
          "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
          "text_config": {"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "intermediate_size": 11264, "moe_intermediate_size": 1408, "n_routed_experts": 64,
            "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1,
            "vocab_size": 163840, "tie_word_embeddings": false}}"#;
        let i = import(text, "k.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "fp8-block128");
        assert_eq!(i.model.config.q_lora_rank, None);
    }

    #[test]
    fn mixed_group_takes_the_majority_and_warns() {
        // Only layer 0's attention is ignored: 1 of 4 layers BF16.
        let q = r#", "quantization_config": {"quant_method": "fp8",
            "modules_to_not_convert": ["model.layers.0.self_attn"]}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "fp8");
        assert!(
            i.warnings.iter().any(|w| w.starts_with("attention:")),
            "{:?}",
            i.warnings
        );
    }

    #[test]
    fn unknown_quant_method_is_an_error() {
        let e = import(
            &llama(r#", "quantization_config": {"quant_method": "eetq"}"#),
            "l.json",
            None,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("eetq") && e.contains("quant_method"), "{e}");
    }

    #[test]
    fn gptq_and_awq_read_bits_group_zero_points_and_exclusions() {
        let q = r#", "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
            "desc_act": true, "sym": true}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "int4-g128");
        assert_eq!(i.model.quantization.lm_head(), WeightFormat::BF16);
        assert!(
            i.warnings.iter().any(|w| w.contains("desc_act")),
            "{:?}",
            i.warnings
        );
        let q = r#", "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
            "zero_point": true, "modules_to_not_convert": ["self_attn"]}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        let qs = &i.model.quantization;
        assert_eq!(qs.dense_mlp().to_string(), "int4-g64-zp");
        assert_eq!(qs.dense_mlp().bits_per_weight(), 4.0 + 20.0 / 64.0);
        assert_eq!(qs.attention(), WeightFormat::BF16);
        let q = r#", "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}"#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        assert_eq!(i.model.quantization.default.to_string(), "int4-channel");
        let back: crate::spec::ModelSpec = crate::spec::registry::parse_toml(&i.toml, "t").unwrap();
        assert_eq!(back, i.model);
        let q =
            r#", "quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128}"#;
        let e = import(&llama(q), "l.json", None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bits") && e.contains('3'), "{e}");
    }

    #[test]
    fn non_finite_json_literals_are_read_as_hf_writes_them() {
        let q = r#", "router_aux_loss_coef": Infinity, "initializer_range": -Infinity,
            "attention_dropout": NaN, "tokenizer_class": "Infinity NaN""#;
        let i = import(&llama(q), "l.json", None, None).unwrap();
        assert!(i.warnings.is_empty(), "{:?}", i.warnings);
        assert_eq!(i.model.config.hidden_size, 4096);
    }
}
