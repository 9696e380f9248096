//! Reader for PyTorch profiler traces (Chrome trace JSON from `torch.profiler`), the source of
//! the per-category split of decode time the team compared the model against (all-reduce at
//! 51.5 % of decode time). It exists so a trace gives the same breakdown the model predicts.
//!
//! GPU kernels are events with `"ph": "X"` and `"cat"` `"kernel"` (also `"Kernel"`,
//! `"gpu_kernel"`, as older exports write it), with a `name` and a duration `dur` in µs. Each
//! kernel's name is put in a [`TraceCategory`] by [`categorize`], and the file gives one
//! [`Quantity::CategoryShare`] per category (all six, zeros included, summing to 1): the
//! category's summed kernel time over all kernels' summed time. Kernel time is summed, not
//! wall time: kernels overlapping on several streams count in full. Memory copies and sets
//! (`gpu_memcpy`, `gpu_memset`) and CPU events are not kernels and are left out.
//!
//! The trace does not say the batch it was taken at; the caller gives it (`concurrency_hint`,
//! default 1). It also does not separate prefill from decode: a decode-only capture gives
//! decode shares.
//!
//! Both `{"traceEvents": [...]}` and a bare event array are read. A kernel event without a
//! string `name` or a non-negative numeric `dur` is an error naming the event's index.

use super::{measured_error, observation, MeasuredSet, Quantity, TraceCategory};
use crate::error::Result;
use serde::Deserialize;
use serde_json::Value;

/// One trace event, with only the fields read; the rest (`args`, `ts`, `pid`…) is skipped.
/// Fields are kept as raw values so odd non-kernel events do not stop the read.
#[derive(Deserialize)]
struct Event {
    ph: Option<Value>,
    cat: Option<Value>,
    name: Option<Value>,
    dur: Option<Value>,
}

#[derive(Deserialize)]
struct TraceFile {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Event>,
}

/// Parse a profiler trace into category shares at `concurrency_hint` (default 1).
pub fn parse_trace(text: &str, file: &str, concurrency_hint: Option<u32>) -> Result<MeasuredSet> {
    let json_error = |e: serde_json::Error| {
        measured_error(
            file,
            Some(e.line().max(1)),
            format!("not a profiler trace (expected {{\"traceEvents\": [...]}}): {e}"),
        )
    };
    let events: Vec<Event> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).map_err(json_error)?
    } else {
        serde_json::from_str::<TraceFile>(text)
            .map_err(json_error)?
            .trace_events
    };

    let mut time = [0.0f64; TraceCategory::ALL.len()];
    let mut kernels = 0usize;
    for (index, event) in events.iter().enumerate() {
        if !is_kernel(event) {
            continue;
        }
        let bad = |what: &str| {
            measured_error(
                file,
                None,
                format!("kernel event #{index} (0-based in traceEvents): {what}"),
            )
        };
        let name = event
            .name
            .as_ref()
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no string `name`"))?;
        let dur = event
            .dur
            .as_ref()
            .and_then(Value::as_f64)
            .filter(|d| d.is_finite() && *d >= 0.0)
            .ok_or_else(|| bad(&format!("`{name}` has no non-negative number `dur` (µs)")))?;
        let slot = TraceCategory::ALL
            .iter()
            .position(|c| *c == categorize(name))
            .unwrap_or(TraceCategory::ALL.len() - 1);
        if let Some(t) = time.get_mut(slot) {
            *t += dur;
        }
        kernels += 1;
    }

    let total: f64 = time.iter().sum();
    if kernels == 0 {
        return Err(measured_error(
            file,
            None,
            "no GPU kernel events (\"ph\": \"X\", \"cat\": \"kernel\"): was the trace taken \
             with ProfilerActivity.CUDA?",
        ));
    }
    if total <= 0.0 {
        return Err(measured_error(
            file,
            None,
            "kernel durations sum to zero: no shares to compute",
        ));
    }
    // Each `dur` is finite, but their sum can overflow (two of 1e308 µs): the shares would be
    // 0 and NaN.
    if !total.is_finite() {
        return Err(measured_error(
            file,
            None,
            "kernel durations sum past the largest number: no shares to compute",
        ));
    }
    let concurrency = concurrency_hint.unwrap_or(1);
    let observations = TraceCategory::ALL
        .iter()
        .zip(time)
        .map(|(&category, t)| {
            observation(
                Quantity::CategoryShare {
                    concurrency,
                    category,
                    share: t / total,
                },
                file,
                None,
            )
        })
        .collect();
    Ok(MeasuredSet {
        system: None,
        model: None,
        observations,
        devices: Vec::new(),
    })
}

fn is_kernel(event: &Event) -> bool {
    let ph = event.ph.as_ref().and_then(Value::as_str);
    let cat = event.cat.as_ref().and_then(Value::as_str);
    ph == Some("X") && cat.is_some_and(|c| c.eq_ignore_ascii_case("kernel") || c == "gpu_kernel")
}

/// The category of a GPU kernel, from its name. Checked in this order, first match wins (the
/// order settles names that match two rules, e.g. a fused MoE kernel built on CUTLASS):
///
/// 1. all-reduce: `allreduce`/`all_reduce` anywhere (NCCL's `ncclDevKernel_AllReduce_…`,
///    `ncclKernel_AllReduce_…`, fused all-reduce + norm kernels) and vLLM's custom all-reduce
///    (`cross_device_reduce_1stage/2stage`). Other collectives are `Other`.
/// 2. MoE: `marlin`, `moe` (`fused_moe_kernel`, `cutlass_moe_mm`, `moe_align_block_size`).
///    Marlin also serves dense W4A16 layers; in the deployments modelled, only the routed
///    experts are INT4, so Marlin time is expert time.
/// 3. attention: `flash` (but not the `flashinfer` library prefix by itself, which also names
///    norm and sampling kernels), `attention`, `attn`, `fmha`, `kvcache`, and `mla` as a word
///    start (`FlashMLA`, `cutlass_mla_decode`, `concat_and_cache_mla`).
/// 4. GEMM: `gemm`, `gemv`, `cutlass`, `xmma` (`sm90_xmma_…`), `sm100`, `cublas`, `nvjet`,
///    `matmul`.
/// 5. dequant / dtype conversion: `cast` (not inside `broadcast`, `multicast`, or PyTorch's
///    `gpu_kernel_impl_nocast`; PyTorch's converting copies carry `LoadWithCast`), `to_copy`,
///    `dequant`, `quant` (stand-alone (de)quantization such as `scaled_fp8_quant`),
///    `convert`, `cvt`. Checked after GEMM because fused dequant-GEMM kernels, and CUTLASS
///    kernels whose template arguments name a `NumericConverter`, are GEMM time.
/// 6. everything else (norms, activations, rotary, sampling, same-dtype copies such as a
///    `direct_copy_kernel_cuda` without `LoadWithCast`) is `Other`.
pub fn categorize(kernel_name: &str) -> TraceCategory {
    let name = kernel_name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if has(&["allreduce", "all_reduce", "cross_device_reduce"]) {
        return TraceCategory::Allreduce;
    }
    if has(&["marlin", "moe"]) {
        return TraceCategory::Moe;
    }
    let without_flashinfer = name.replace("flashinfer", "");
    let mla_word = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.starts_with("mla"));
    if without_flashinfer.contains("flash")
        || has(&["attention", "attn", "fmha", "kvcache"])
        || mla_word
    {
        return TraceCategory::Attention;
    }
    if has(&[
        "gemm", "gemv", "cutlass", "xmma", "sm100", "cublas", "nvjet", "matmul",
    ]) {
        return TraceCategory::Gemm;
    }
    let without_casts = name
        .replace("broadcast", "")
        .replace("multicast", "")
        .replace("nocast", "");
    if without_casts.contains("cast") || has(&["to_copy", "quant", "convert", "cvt"]) {
        return TraceCategory::Dequant;
    }
    TraceCategory::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn categorizes_real_kernel_names() {
        use TraceCategory::*;
        let table = [
            ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Allreduce),
            ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", Allreduce),
            ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", Allreduce),
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Other),
            ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Other),
            ("void marlin_moe_wna16::Marlin<(vllm::ScalarTypeId)5, 256, 1, 8, 8, 4, false, 4, 8, false>(int4 const*, ...)", Moe),
            ("void MARLIN::Marlin<128, 1, 8, 8, 4, 8>(int4 const*, int4 const*, int4*, int4 const*, int, int, int, int, int*)", Moe),
            ("fused_moe_kernel", Moe),
            ("void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, unsigned long)", Moe),
            ("void flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true>(Flash_fwd_mla_params)", Attention),
            ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>", Attention),
            ("void flashinfer::mla::BatchMLAPagedAttentionKernel<...>", Attention),
            ("void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)", Attention),
            ("void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaMlaKernelTmaWarpspecialized<...>>", Attention),
            ("void vllm::paged_attention_v1_kernel<__nv_bfloat16, 128>", Attention),
            ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", Gemm),
            ("nvjet_tst_128x64_64x8_2x1_v_bz_TNT", Gemm),
            ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(...)", Gemm),
            ("void cutlass::device_kernel<... cutlass::NumericConverter<float, cutlass::bfloat16_t> ...>", Gemm),
            ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", Gemm),
            ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(...)", Other),
            ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<...>", Other),
            ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}, ...>", Other),
            ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float>>>", Other),
            ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >", Dequant),
            ("aten::_to_copy", Dequant),
            ("void cast_fp4_to_bf16_kernel<...>", Dequant),
            ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(...)", Dequant),
            ("void vllm::cvt_fp16_to_fp4<__nv_bfloat16, false>(...)", Dequant),
            ("void vllm::rms_norm_kernel<c10::BFloat16>(...)", Other),
            ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(...)", Other),
            ("", Other),
        ];
        for (name, want) in table {
            assert_eq!(categorize(name), want, "{name}");
        }
    }

    const TRACE: &str = r#"{"schemaVersion": 1, "traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 500},
 {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": 2, "dur": 50},
 {"ph": "X", "cat": "kernel", "name": "Marlin<128>", "ts": 3, "dur": 30.0},
 {"ph": "X", "cat": "Kernel", "name": "rms_norm_kernel", "ts": 4, "dur": 20},
 {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 5, "dur": 1000},
 {"ph": "i", "cat": "kernel", "name": "marker", "ts": 6},
 {"ph": "M", "name": "process_name", "args": {"name": "python"}}
]}"#;

    #[test]
    fn shares_of_kernel_time() {
        let set = parse_trace(TRACE, "t.json", Some(4)).unwrap();
        assert_eq!(set.observations.len(), 6);
        let share = |c: TraceCategory| {
            set.observations
                .iter()
                .find_map(|o| match o.quantity {
                    Quantity::CategoryShare {
                        category,
                        share,
                        concurrency: 4,
                    } if category == c => Some(share),
                    _ => None,
                })
                .unwrap()
        };
        assert_relative_eq!(share(TraceCategory::Allreduce), 0.5);
        assert_relative_eq!(share(TraceCategory::Moe), 0.3);
        assert_relative_eq!(share(TraceCategory::Other), 0.2);
        assert_relative_eq!(share(TraceCategory::Gemm), 0.0);
    }

    #[test]
    fn bare_array_and_default_concurrency() {
        let text = r#"[{"ph": "X", "cat": "kernel", "name": "gemm", "dur": 1}]"#;
        let set = parse_trace(text, "t.json", None).unwrap();
        assert!(matches!(
            set.observations[3].quantity,
            Quantity::CategoryShare { concurrency: 1, category: TraceCategory::Gemm, share } if share == 1.0
        ));
    }

    #[test]
    fn errors() {
        let e = parse_trace(&TRACE[..200], "t.json", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.json:"), "{e}");
        let e = parse_trace(r#"{"traceEvents": []}"#, "t.json", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no GPU kernel events"), "{e}");
        let e = parse_trace(
            r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}"#,
            "t.json",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("#0") && e.contains("dur"), "{e}");
        assert!(parse_trace(r#"{"events": []}"#, "t.json", None).is_err());
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "",
            "[",
            "{",
            "null",
            "[1]",
            "{\"traceEvents\": 5}",
            "{\"traceEvents\": [{\"ph\": 1, \"cat\": {}}]}",
            "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": 3, \"dur\": 1}]",
            "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"a\", \"dur\": -1}]",
        ] {
            assert!(parse_trace(t, "f", None).is_err(), "{t}");
        }
    }
}
