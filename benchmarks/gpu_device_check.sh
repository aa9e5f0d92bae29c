#!/bin/bash
# The GPU check in one call on a machine without network access: install the wheels copied into .whl/ (that machine
# lacks trl, datasets, reasoning_gym, bitsandbytes), then run benchmarks/gpu_check.py under a deadline so that the
# whole call ends by itself within BUDGET_S seconds; every figure lands in $OUT as soon as it is measured.
#   OUT=/tmp/out BUDGET_S=450 bash benchmarks/gpu_device_check.sh [gpu_check.py arguments]
# Without arguments: --sections fit main speedups (training throughput and fit of the 6.9 GiB configs, the 4B QLoRA
# fit, the tiny main job on the GPU, the CPU speed-ups on the 0.6B shape), in that order of value.
# $OUT gets: install.log, env.txt (versions, GPU), gpu_check.log (the console), gpu_check.json (every row so far,
# rewritten after each), gpu_check.txt (the table), logs/<measurement>.log, main_job/ (benchmark.json, evaluations,
# metrics.jsonl). How the wheels were gathered: docs/measurements/gpu-h200.md.
OUT=${OUT:-runs/gpu_check_out}; BUDGET_S=${BUDGET_S:-450}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
{
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  (cd /tmp && python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /tmp/site \
     "$OLDPWD/.whl/pycosat-0.6.6.tar.gz") || true
  python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import pycosat" || { echo "pycosat did not build: stub (spell_backward never calls it)";
    printf 'def itersolve(*a, **k):\n    raise RuntimeError("pycosat stub on the GPU check machine")\nsolve = itersolve\n' > /tmp/site/pycosat.py; }
  cp -r .whl/bnb/* /tmp/site/
} > "$OUT/install.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD
echo "install: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/install.log"
python3 - > "$OUT/env.txt" 2>&1 <<'PY' || { cat "$OUT/env.txt"; tail -5 "$OUT/install.log"; exit 3; }
import torch, trl, transformers, tokenizers, datasets, peft, accelerate, bitsandbytes, torchao, reasoning_gym, rlvr.rewards, rlvr.data
print({m.__name__: m.__version__ for m in (torch, trl, transformers, tokenizers, datasets, peft, accelerate, bitsandbytes, torchao)})
print(torch.cuda.get_device_name(0), "CUDA", torch.version.cuda)
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$OUT/env.txt" 2>&1
nproc >> "$OUT/env.txt"; cat "$OUT/env.txt"
left=$(( BUDGET_S - ($(date +%s) - t0) - 35 ))  # 35 s: gpu_check's imports before its clock starts, the table, the copy back
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(--sections fit main speedups)
timeout -k 5 $(( left + 30 )) python3 benchmarks/gpu_check.py --max_minutes "$(awk "BEGIN {print $left / 60}")" \
  --out "$OUT" "${args[@]}" 2>&1 | tee "$OUT/gpu_check.log"
echo "gpu_check exit ${PIPESTATUS[0]}, total $(( $(date +%s) - t0 )) s" | tee -a "$OUT/gpu_check.log"
