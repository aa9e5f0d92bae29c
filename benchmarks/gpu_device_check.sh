#!/bin/bash
# The GPU check on a machine without network access: install the wheels copied into .whl/ (that machine lacked trl,
# datasets, reasoning_gym, bitsandbytes), then run benchmarks/gpu_check.py; the log and JSON go to $OUT.
#   OUT=/tmp/out bash benchmarks/gpu_device_check.sh [gpu_check.py arguments]
# How the wheels were gathered: docs/measurements/gpu-h200.md.
OUT=${OUT:-runs/gpu_check_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -3
(cd /tmp && python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /tmp/site "$OLDPWD/.whl/pycosat-0.6.6.tar.gz" 2>&1 | tail -2) \
  || true
python3 -c "import sys; sys.path.insert(0, '/tmp/site'); import pycosat" 2>/dev/null || { echo "pycosat did not build: stub (spell_backward never calls it)";
  printf 'def itersolve(*a, **k):\n    raise RuntimeError("pycosat stub on the GPU check machine")\nsolve = itersolve\n' > /tmp/site/pycosat.py; }
cp -r .whl/bnb/* /tmp/site/
export PYTHONPATH=/tmp/site:$PWD
echo "install: $(( $(date +%s) - t0 )) s"
python3 - <<'PY' || exit 3
import torch, trl, transformers, datasets, peft, accelerate, bitsandbytes, reasoning_gym, rlvr.rewards, rlvr.data
print({m.__name__: m.__version__ for m in (torch, trl, transformers, datasets, peft, accelerate, bitsandbytes)})
print(torch.cuda.get_device_name(0), torch.version.cuda)
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(--steps 3 --max_minutes 7)
python3 benchmarks/gpu_check.py "${args[@]}" 2>&1 | tee $OUT/gpu_check.log
echo "gpu_check exit ${PIPESTATUS[0]}, total $(( $(date +%s) - t0 )) s"
cp runs/gpu_check.json $OUT/ 2>/dev/null
