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
# The last line printed is the summary: steady env steps/s, learner s per iteration and the
# peak GPU memory (torch's max allocated and reserved, nvidia-smi's largest memory.used).
# Expected wall time: ~1 min sync (offline: uses the existing .venv), 1-2 min Ray and 14 env
# runners starting, then seconds per iteration; well inside the timeout.
#
# CPU dry-run (no GPU; what tests/bench/test_gpu_flagship_dry_run.py runs): the same script
# and recipe at the smoke budget on the cpu-local profile, no uv sync:
#   GPU_FLAGSHIP_DRY_RUN=1 GPU_FLAGSHIP_ITERATIONS=2 bash bench/gpu_flagship.sh
set -uo pipefail

OUT="${OUT:-$PWD/gpu_flagship_out}"
mkdir -p "$OUT"
export GPU_FLAGSHIP_OUT="$OUT"

# `python3 -m uv` where that python has uv (the GPU machine's setup), else `uv` on PATH.
UV=(python3 -m uv)
python3 -m uv --version >/dev/null 2>&1 || UV=(uv)
UV_RUN=("${UV[@]}" run --frozen)
if [ "${GPU_FLAGSHIP_DRY_RUN:-0}" = "1" ]; then
    RUN_ARGS=(--hardware-profile cpu-local --smoke)
    UV_RUN+=(--no-sync)
else
    RUN_ARGS=(--hardware-profile single-gpu)
    if ! "${UV[@]}" sync --frozen >"$OUT/uv_sync.log" 2>&1; then
        echo "uv sync --frozen failed (see uv_sync.log); using the existing .venv" | tee -a "$OUT/run.log"
    fi
fi
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$OUT/nvidia-smi.txt"
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -l 2 \
    >"$OUT/nvidia-smi-trace.csv" 2>&1 &
TRACE=$!

timeout "${GPU_FLAGSHIP_TIMEOUT:-480}" "${UV_RUN[@]}" rl-harness \
    bench/gpu_flagship_recipe.py "${RUN_ARGS[@]}" \
    --results-dir "$OUT/results" --artifacts-dir "$OUT/artifacts" --no-upload-artifacts \
    >>"$OUT/run.log" 2>&1
CODE=$?
echo "$CODE" >"$OUT/exit_code"
kill "$TRACE" 2>/dev/null
wait "$TRACE" 2>/dev/null
rm -rf "$OUT/artifacts"  # checkpoints: not needed for the figures, large
tail -n 5 "$OUT/run.log"
echo "exit code $CODE; figures in $OUT/gpu_flagship.json"
grep '^\[gpu_flagship\] summary' "$OUT/run.log" | tail -n 1
exit "$CODE"
