#!/usr/bin/env bash
# Seed the libFuzzer corpora (fuzz/corpus/<target>/, not committed) from the project's valid
# fixtures, so coverage-guided runs start from real files. Run from the repository root.
set -euo pipefail
c=fuzz/corpus
m=tests/fixtures/measured
seed() { # target, files...
  local t=$1; shift
  mkdir -p "$c/$t"
  for f in "$@"; do cp "$f" "$c/$t/seed-$(basename "$f")"; done
}
seed macro_log $m/*macro*.log
seed vllm_json $m/vllm_*
seed nccl $m/nccl_*
seed gemm_csv $m/gemm_*
seed trace $m/*trace*
seed measurement_toml $m/measurement*.toml configs/measured/*.toml
mkdir -p "$c/import_hf"
for f in tests/fixtures/hf/*/config.json; do
  cp "$f" "$c/import_hf/seed-$(basename "$(dirname "$f")").json"
done
# descriptions: the first byte picks the kind (0 GPU, 1 interconnect, 2 system, 3 model).
mkdir -p "$c/descriptions"
k=0
for d in gpus interconnects systems models; do
  for f in configs/$d/*.toml; do
    { printf "\\x0$k"; cat "$f"; } > "$c/descriptions/seed-$d-$(basename "$f")"
  done
  k=$((k + 1))
done
mkdir -p "$c/set_override" "$c/units"
i=0
for s in 'gpu.memory_bandwidth=2.4 TB/s' 'interconnect.bandwidth=128 GB/s' \
  'system.cuda_graphs=false' 'efficiency.memory=0.9' 'model.config.num_experts_per_tok=4' \
  'system.interconnect=nvlink5'; do
  printf '%s' "$s" > "$c/set_override/seed-$i"; i=$((i + 1))
done
for s in '1792 GB/s' '96 GB' '24 us' '503.8 TFLOPS' '2617 MHz' 'tp4ep2pp2' 'int4-g128'; do
  printf '%s' "$s" > "$c/units/seed-$i"; i=$((i + 1))
done
