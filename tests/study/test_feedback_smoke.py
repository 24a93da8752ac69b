"""The mess3_feedback study end to end through the real CLI in smoke mode (Ray, one small
iteration, probes of the step-0 and iteration-1 checkpoints): minutes on 2 cores, `slow`."""

from __future__ import annotations

import json

import pytest

from rl_harness import Metric, read_results
from rl_harness.analysis.comparison import compare_runs
from tests.study.test_belief_geometry_smoke import smoke

LEAF = "experiments.mess3_feedback.ppo.experiment"


@pytest.mark.slow
def test_feedback_smoke_writes_probes_ceilings_and_controls(tmp_path):
    run_dir = smoke(LEAF, tmp_path, "ppo")
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True
    record = json.loads((run_dir / "probe_metrics.json").read_text())
    assert record["process"]["emission"] == "on_leave" and record["process"]["feedback"] == 0.1
    assert [p["env_steps"] for p in record["probes"]] == [0, 1024]
    assert [p["env_steps"] for p in record["replay_probes"]] == [0, 1024]
    # The last checkpoint on its own rollouts is the same data in both lists.
    assert record["probes"][-1]["r2_pooled"] == record["replay_probes"][-1]["r2_pooled"]
    final = record["final"]
    assert final["probe"]["r2_pooled"] == record["probes"][-1]["r2_pooled"]
    scores = final["scores"]
    assert 0.0 <= scores["exact_accuracy"] <= scores["bayes_optimal_same_steps"] <= 1.0
    assert abs(record["ceilings"]["bayes_optimal_accuracy"] - 0.6996) < 0.02
    assert set(final["ablations"]) == {"mask", "shuffle"}
    # The library's policy read-outs against the Bayes guesser, beside its value.
    readouts = record["policy_readouts"]
    assert set(readouts) == {"n_actions", "greedy", "sampled", "reference_value"}
    ceiling = record["ceilings"]["bayes_optimal_accuracy"]
    assert readouts["reference_value"]["value"] == ceiling
    assert 0.0 <= readouts["greedy"]["agreement"] <= 1.0
    result = read_results(run_dir)
    assert result.value("iterations") == 1 and result.value("checkpoints") == 2
    # The final probe's named metric keeps its interval.
    assert result["r2_pooled"] == Metric(**record["final"]["probe"]["r2_pooled"])
    assert compare_runs([run_dir], ["r2_pooled"]).arms[0].metrics["r2_pooled"].values == [
        record["final"]["probe"]["r2_pooled"]["value"]
    ]
    # compare reaches the last checkpoint's probe inside the list.
    key = "probe_metrics.json:probes[-1]/r2_pooled"
    arm = compare_runs([run_dir], [key]).arms[0].metrics[key]
    assert arm.values == [record["probes"][-1]["r2_pooled"]["value"]]
