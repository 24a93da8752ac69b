"""The original study's probe protocol at step 0, measured on our module (issue 52 item 6).

    uv run python -m experiments.mess3_belief_geometry.original_protocol [--seeds 0 1 2]

At step 0 (no training) our probe over training reads R² ~0.85 where the original's
probe_curve.json reads ~0.58 (original_figures.json; the README's table). Training, budget and
the KL term cannot act before training, so the candidates are the probe's data, the probe
itself and the module. This measures the first: untrained modules of our architecture (the
flagship's `reward_only` module spec and initialisation, `probing.untrained_module`, one per
seed) roll the flagship task out **with their own sampled policy** (the original's
`policy_mode "policy"`: each checkpoint acts for itself), scored by our probe (the analysis'
split, ridge and branching: global and within equal last 2 visible tokens), on as many
episodes as our probe over training (`training_probe_episodes`) and the CPU budget's warm-up
and episode length. Our table's step-0 rows instead replay the final agent's greedy episodes
through the initialised network: the actions in its input are a trained agent's.

Writes original_protocol.json beside this file (the report reads it); a fresh initialisation
per seed stands in for each run's own step-0 weights (same architecture and initialisation
scheme, another draw).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry import incremental, probing, spec
from rl_harness import write_json
from rl_harness.analysis import collect_rollouts
from rl_harness.seeding import stream_seed

RECORD = Path(__file__).resolve().parent / "original_protocol.json"
N_BOOTSTRAP = 200  # the intervals only; the values do not depend on it


def measure(seed: int, say: Any = print) -> dict[str, Any]:
    """One fresh initialisation rolled out by its own sampled policy, probed as ours."""
    from experiments.mess3_belief_geometry.reward_only import experiment as recipe

    plan = dataclasses.replace(spec.BUDGETS["cpu"], n_bootstrap=N_BOOTSTRAP)
    make_env = probing.probe_env_factory(decision_belief_in_observation=False)
    env = make_env(1)
    layout, action_space = env.layout, env.single_action_space
    env.close()
    module = probing.untrained_module(
        recipe.module_spec(), make_env, stream_seed(seed, "study", "original_protocol")
    )
    settings = probing.rollout_settings(plan, seed, make_env, action_space)
    started = time.perf_counter()
    rollouts = collect_rollouts(
        module,
        n_episodes=plan.training_probe_episodes,
        episode_steps=plan.probe_steps,
        policy="sample",
        **settings,
    )
    say(f"seed {seed}: rollouts in {time.perf_counter() - started:.0f} s")
    report = incremental.agent_probe(rollouts, layout, plan, seed).report.to_dict()
    return {
        "seed": seed,
        "r2_pooled": report["r2_pooled"],
        "within_branch_r2_pooled": (report.get("within_branch") or {}).get("r2_pooled"),
        "return_per_step": float(rollouts.rewards.mean()),
        "n_episodes": plan.training_probe_episodes,
        "episode_steps": plan.probe_steps,
        "warmup_steps": plan.warmup_steps,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.mess3_belief_geometry.original_protocol"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(probing.ANALYSIS_TORCH_THREADS)
    rows = [measure(seed) for seed in args.seeds]
    write_json(
        RECORD,
        {
            "what": "untrained modules of our architecture (reward_only's spec and "
            "initialisation, one fresh draw per seed) rolled out on the flagship task with "
            "their own sampled policy, as the original's probe_curve.json at step 0; our "
            "probe (global, within tokens_2)",
            "command": "uv run python -m experiments.mess3_belief_geometry.original_protocol",
            "rows": rows,
        },
    )
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
