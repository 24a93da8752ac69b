"""Scaffolding shared by the flagship study's tests (controls, interventions, yardstick,
incremental R², analysis stages): an untrained reward_only agent, and a results folder as a
finished smoke run of reward_only leaves it, with no training."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry import probing
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

# The records the analysis stages read of a finished run besides its agent and manifest.
STAGE_RECORDS = {"probe_metrics.json": {"recipe": "reward_only"}, "result.json": {"probe_r2": 0.5}}


def untrained_agent(seed: int = 11) -> tuple[Any, Callable[..., Any]]:
    """reward_only's module, untrained (initialised from `seed`), and the study's probe env
    factory (the decision belief not in the observation)."""
    make_env = probing.probe_env_factory(decision_belief_in_observation=False)
    return probing.untrained_module(reward_only.module_spec(), make_env, seed=seed), make_env


def write_finished_run(
    root: Path, agent: Any, seed: int, records: Mapping[str, Any] | None = None
) -> tuple[Path, Path]:
    """results/run-1 under `root` as a finished smoke run of reward_only leaves it (manifest,
    summary.json, and `records`: other JSON files by name), its agent saved where the run's
    final checkpoint would be. Returns (results folder, checkpoint folder)."""
    checkpoint = root / "artifacts" / "checkpoints" / "iter_000001"
    agent.save_to_path(
        str(checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy")
    )
    (checkpoint / "rllib_checkpoint.json").write_text("{}")
    results = root / "results" / "run-1"
    results.mkdir(parents=True)
    manifest = {
        "run_id": "run-1",
        "status": "completed",
        "seed": seed,
        "experiment": {"module": "experiments.mess3_belief_geometry.reward_only.experiment"},
        "options": {"smoke": True, "seed": seed},
        "artifacts": {"local": str(root / "artifacts"), "remote": None},
    }
    (results / "run_manifest.json").write_text(json.dumps(manifest))
    summary = {"run_id": "run-1", "seed": seed, "final_checkpoint": str(checkpoint)}
    (results / "summary.json").write_text(json.dumps(summary))
    for name, record in (records or {}).items():
        (results / name).write_text(json.dumps(record))
    return results, checkpoint
