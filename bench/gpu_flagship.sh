#!/usr/bin/env bash
# The flagship on one GPU: a few iterations of the study's FULL budget settings with
# --hardware-profile single-gpu (learner on the GPU, CPUs - 2 env runners of 64 envs each),
# recording env steps/s, learner time, GPU memory (torch and nvidia-smi) and any error.
#
# One command from the repo root on a fresh GPU machine:
#   bash bench/gpu_flagship.sh
# Writes into $OUT (default ./gpu_flagship_out): gpu_flagship.json (per iteration: seconds,
# env steps/s, learner s, torch.cuda.max_memory_allocated/reserved, nvidia-smi memory.used
# and utilization; the error and traceback if any), run.log (the CLI's output),
# nvidia-smi.txt, nvidia-smi-trace.csv (memory and utilization every 2 s), uv_sync.log,
# exit_code. Settings: GPU_FLAGSHIP_ITERATIONS (default 4, the first is warm-up),
# GPU_FLAGSHIP_PATH (kv-steps | whole-cache), GPU_FLAGSHIP_TIMEOUT (seconds, default 480).
# Expected wall time: ~1 min sync (offline: uses the existing .venv), 1-2 min Ray and 14 env
# runners starting, then seconds per iteration; well inside the timeout.
set -uo pipefail

OUT="${OUT:-$PWD/gpu_flagship_out}"
mkdir -p "$OUT"
export GPU_FLAGSHIP_OUT="$OUT"

if ! python3 -m uv sync --frozen >"$OUT/uv_sync.log" 2>&1; then
    echo "uv sync --frozen failed (see uv_sync.log); using the existing .venv" | tee -a "$OUT/run.log"
fi
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$OUT/nvidia-smi.txt"
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -l 2 \
    >"$OUT/nvidia-smi-trace.csv" 2>&1 &
TRACE=$!

timeout "${GPU_FLAGSHIP_TIMEOUT:-480}" python3 -m uv run --frozen rl-harness \
    bench/gpu_flagship_recipe.py --hardware-profile single-gpu \
    --results-dir "$OUT/results" --artifacts-dir "$OUT/artifacts" --no-upload-artifacts \
    >>"$OUT/run.log" 2>&1
CODE=$?
echo "$CODE" >"$OUT/exit_code"
kill "$TRACE" 2>/dev/null
wait "$TRACE" 2>/dev/null
rm -rf "$OUT/artifacts"  # checkpoints: not needed for the figures, large
echo "exit code $CODE; figures in $OUT/gpu_flagship.json"
tail -n 5 "$OUT/run.log"
exit "$CODE"
