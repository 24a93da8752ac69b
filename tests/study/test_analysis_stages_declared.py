"""Each training leaf of the flagship and token-guess studies declares the analysis its run()
runs after training as ANALYSIS_STAGES (`rl-harness analyze` runs the same on finished
runs): `analysis` on the run's checkpoints, then `result` from the record it wrote."""

from __future__ import annotations

import importlib

import pytest

from rl_harness.analysis.stages import leaf_stages
from tests.study.test_belief_geometry_configs import STUDY, TRAINING_LEAVES

MEMORY = [f"{STUDY}.{leaf}.experiment" for leaf in ("reward_only_memory", "next_token_aux_memory")]
TOKEN_GUESS = [
    f"experiments.mess3_token_guess.{leaf}.experiment"
    for leaf in ("ppo", "ppo_default_init", "ppo_no_kl", "supervised")
]

ACTION_SYMMETRY = [
    f"experiments.mess3_action_symmetry.{leaf}.experiment"
    for leaf in ("variant_2", "variant_2_no_delay")
]


@pytest.mark.parametrize(
    "target", [*TRAINING_LEAVES.values(), *MEMORY, *TOKEN_GUESS, *ACTION_SYMMETRY]
)
def test_a_training_leaf_declares_its_analysis_then_its_result(target):
    leaf = importlib.import_module(target)
    stages = leaf_stages(leaf)
    if target in MEMORY:
        # The incremental tests alone (a finished run re-read with the plan's untrained
        # inits) sit between; run() runs the analysis (which makes both) and the result.
        names = [
            "analysis",
            "incremental_r2",
            "incremental_r2_sampled",
            "result",
            "window_capacity",
        ]
        assert [stage.name for stage in stages] == names
        for alone in stages[1:3]:
            assert alone.checkpoints and alone.writes == ("probe_metrics.json", "result.json")
        stages = leaf.ANALYSIS_STAGES
    if target.startswith(f"{STUDY}."):
        # The flagship's leaves declare the window-capacity check last, run only when named.
        *stages, capacity = stages
        assert capacity.name == "window_capacity" and capacity.on_request
        assert capacity.checkpoints and capacity.reads == ("probe_metrics.json",)
        assert capacity.writes == ("window_capacity.json",)
    assert [stage.name for stage in stages] == ["analysis", "result"]
    analysis, result = stages
    assert analysis.checkpoints and "probe_metrics.json" in analysis.writes
    assert "metrics.jsonl" in analysis.reads
    # The result reads only the record the analysis wrote: a rerun analysis makes it stale.
    assert result.reads == ("probe_metrics.json",) and not result.checkpoints
    assert result.writes == ("result.json",)
