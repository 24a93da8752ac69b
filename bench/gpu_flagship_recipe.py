"""Recipe for bench/gpu_flagship.sh: the flagship (reward_only) at its FULL budget's settings
(its BUDGETS, default full here; `--budget cpu` or `--smoke` for another) for a few
iterations on the hardware profile given to the CLI, recording speed and GPU memory.

    python3 -m uv run rl-harness bench/gpu_flagship_recipe.py --hardware-profile single-gpu

Environment: GPU_FLAGSHIP_OUT (folder for gpu_flagship.json, default the run's results
folder), GPU_FLAGSHIP_ITERATIONS (default 4; the first is warm-up), GPU_FLAGSHIP_PATH
("kv-steps", the default: store_kv_steps; "whole-cache": RLlib stores the whole K/V cache
per step, as the recipe does until it installs store_kv_steps).

gpu_flagship.json: the plan and budget, then per iteration: seconds, env steps, env steps/s,
learner seconds (learner_group.update), torch.cuda.max_memory_allocated / reserved in the
driver (the single-gpu profile's learner is local: num_learners 0), nvidia-smi's memory.used
and utilization; and the error with its traceback if the run failed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry.reward_only import experiment as flagship

from rl_harness import Recipe, RunContext, run_algorithm


def _nvidia_smi() -> list[dict[str, str]]:
    query = "memory.used,memory.total,utilization.gpu"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return [{"error": str(error)}]
    return [
        dict(zip(query.split(","), (part.strip() for part in line.split(",")), strict=False))
        for line in out.strip().splitlines()
    ]


def _gpu_memory() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"cuda": False}
    return {
        "cuda": True,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
    }


def run(context: RunContext[flagship.Budget]) -> dict[str, Any]:
    out = Path(os.environ.get("GPU_FLAGSHIP_OUT") or context.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    iterations = int(os.environ.get("GPU_FLAGSHIP_ITERATIONS", "4"))
    path = os.environ.get("GPU_FLAGSHIP_PATH", "kv-steps")
    plan = context.settings  # the flagship's budget by name, default full
    config = flagship.build_config(plan)
    if path == "kv-steps":
        from rl_harness.learners.models import store_kv_steps

        store_kv_steps(config)
    record: dict[str, Any] = {
        "path": path,
        "hardware": context.hardware.to_dict(),
        "budget": dataclasses.asdict(plan),
        "iterations": [],
    }
    learner_seconds: list[float] = []
    last = [time.perf_counter(), 0]

    def save() -> None:
        (out / "gpu_flagship.json").write_text(json.dumps(record, indent=2), encoding="utf-8")

    def on_iteration(algo: Any, result: dict[str, Any]) -> None:
        if not learner_seconds:  # time the learner from the next iteration on
            update = algo.learner_group.update

            def timed(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return update(*args, **kwargs)
                finally:
                    learner_seconds.append(time.perf_counter() - start)

            algo.learner_group.update = timed
            learner_seconds.append(float("nan"))  # the first iteration: not timed
        now, steps = time.perf_counter(), int(result["num_env_steps_sampled_lifetime"])
        seconds = now - last[0]
        record["iterations"].append(
            {
                "iteration": int(result["training_iteration"]),
                "seconds": seconds,
                "env_steps": steps,
                "env_steps_per_s": (steps - last[1]) / seconds,
                "learner_s": learner_seconds[-1],
                "torch": _gpu_memory(),
                "nvidia_smi": _nvidia_smi(),
            }
        )
        last[:] = [now, steps]
        save()
        print(f"[gpu_flagship] {json.dumps(record['iterations'][-1])}", flush=True)

    started = time.perf_counter()
    try:
        run_algorithm(config, context, stop=iterations, on_iteration=on_iteration)
    except BaseException as error:
        record["error"] = repr(error)
        record["traceback"] = traceback.format_exc()
        raise
    finally:
        record["wall_s"] = time.perf_counter() - started
        record["summary"] = _summary(record["iterations"])
        save()
        print(f"[gpu_flagship] summary {json.dumps(record['summary'])}", flush=True)
    return record["summary"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v == v)  # NaN (an untimed iteration) left out
    return values[len(values) // 2] if values else None


def _summary(iterations: list[dict[str, Any]]) -> dict[str, Any]:
    """Steady figures over iterations 2..N (the first is warm-up) and the peak GPU memory."""
    steady = iterations[1:]
    torch_memory = [i["torch"] for i in iterations if i["torch"].get("cuda")]
    used = [
        float(gpu["memory.used"].split()[0])
        for i in iterations
        for gpu in i["nvidia_smi"]
        if gpu.get("memory.used", "").split()[:1] and _is_number(gpu["memory.used"].split()[0])
    ]
    return {
        "iterations": len(iterations),
        "steady_env_steps_per_s": _median([i["env_steps_per_s"] for i in steady]),
        "steady_learner_s": _median([i["learner_s"] for i in steady]),
        "steady_iteration_s": _median([i["seconds"] for i in steady]),
        "gpu_max_memory_allocated_gib": (
            max(m["max_memory_allocated"] for m in torch_memory) / 2**30 if torch_memory else None
        ),
        "gpu_max_memory_reserved_gib": (
            max(m["max_memory_reserved"] for m in torch_memory) / 2**30 if torch_memory else None
        ),
        "nvidia_smi_max_memory_used_mib": max(used) if used else None,
    }


# The flagship's budgets, chosen by name (never by the hardware): FULL unless told.
RECIPE = Recipe(run=run, budgets=flagship.RECIPE.budgets, default="full")
