"""The action-symmetry analysis stages on a run folder without Ray (seconds): two saved
checkpoints of a small module of the study's architecture (step 0 and "iteration 1", two
different initialisations standing in for training), recorded as the runners record them
(checkpoints.jsonl, metrics.jsonl, a manifest). The `analysis` stage probes both on their
own play and reads the last one out against the one-step oracle; the `result` stage's
result.json feeds the README's table. The CLI path with real training is the slow smoke
test (test_action_symmetry_smoke.py)."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from experiments.mess3_action_symmetry import report, shared, spec, task
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness import read_results
from rl_harness.analysis.checkpoints import MODULE_SUBDIR
from rl_harness.envs.hmm import HMMVectorEnv

SMALL = {"d_model": 16, "num_layers": 1, "num_heads": 2, "context": 8, "max_seq_len": 8}
PLAN = dataclasses.replace(
    spec.SMOKE, probe_episodes=8, probe_steps=24, probe_envs=8, n_bootstrap=20, n_permutations=5
)


def fake_run(root, leaf: shared.Leaf) -> SimpleNamespace:
    env = HMMVectorEnv(1, shared.analysis_env(leaf))
    module_spec = RLModuleSpec(
        module_class=spec.module_spec().module_class,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config=dict(spec.MODEL_CONFIG) | SMALL,
    )
    env.close()
    results, artifacts = root / "results" / "run", root / "artifacts" / "run"
    results.mkdir(parents=True)
    rows = []
    for iteration in (0, 1):
        torch.manual_seed(iteration)
        checkpoint = artifacts / "checkpoints" / f"iter_{iteration:06d}"
        module_spec.build().save_to_path(checkpoint / MODULE_SUBDIR / "default_policy")
        (checkpoint / "rllib_checkpoint.json").write_text("{}", encoding="utf-8")
        rows.append(
            {"iteration": iteration, "env_steps": 2048 * iteration, "path": str(checkpoint)}
        )
    (results / "checkpoints.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )
    metric = {
        "training_iteration": 1,
        "num_env_steps_sampled_lifetime": 2048,
        "env_runners/episode_return_mean": 51.2,
        "env_runners/episode_len_mean": 256.0,
    }
    (results / "metrics.jsonl").write_text(json.dumps(metric) + "\n", encoding="utf-8")
    manifest = {"status": "completed", "seed": 7, "budget": {"name": "smoke", "settings": {}}}
    (results / "run_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return SimpleNamespace(results_dir=results, seed=7, settings=PLAN)


@pytest.mark.parametrize("delay", [1, 0])
def test_the_analysis_stages_write_the_originals_figures(tmp_path, delay):
    leaf = shared.Leaf(label="variant_2" if delay else "variant_2_no_delay", variant=2, delay=delay)
    context = fake_run(tmp_path, leaf)
    record = shared.analyze(context, leaf)
    assert record == json.loads((context.results_dir / "probe_metrics.json").read_text())
    assert record["observation_delay"] == delay and record["budget"]["probe_steps"] == 24
    assert round(record["facts"]["threshold"], 4) == 0.7541
    # Both checkpoints, each on its own play: the original's per-checkpoint figures.
    probes = record["probes"]
    assert [p["env_steps"] for p in probes] == [0, 2048]
    for probe in probes:
        assert probe["mse"] > 0 and probe["target_variance"] > 0
        assert probe["branch_baseline_mse"] >= 0 and probe["report"]["permutation"] is not None
        extra = probe["extra"]
        assert extra["reward_state_2_fraction"] == probe["reward_per_step"]
        assert np.isclose(sum(extra["readouts"]["fractions"]), 1.0)
        assert set(extra["readouts"]["by_hidden_state"]) <= {"0", "1", "2"}
    # The two initialisations play differently from the same episode seeds.
    assert probes[0]["extra"]["readouts"] != probes[1]["extra"]["readouts"]
    final = record["final"]["policy_readouts"]
    assert set(final) == {"n_actions", "greedy", "sampled", "reference_value"}
    # The last checkpoint's greedy read-outs are the ones its probe's score recorded.
    assert final["greedy"]["agreement"] == probes[-1]["extra"]["readouts"]["agreement"]
    for name in ("greedy", "sampled"):
        if delay == 1:
            # At delay 1 the oracle takes the positive action at every reachable belief.
            assert final[name]["reference_fractions"] == [0.0, 1.0, 0.0]
            assert final[name]["agreement"] == pytest.approx(final[name]["fractions"][1])
    assert 0.0 < final["reference_value"]["value"] < 1.0
    assert record["training_curve"] == [{"iteration": 1, "env_steps": 2048, "return_per_step": 0.2}]
    # The result stage and the README row built from it.
    written = shared.write_result(context)
    assert written == json.loads((context.results_dir / "result.json").read_text())
    result = read_results(context.results_dir)
    assert result.value("checkpoints") == 2 and result.value("env_steps") == 2048
    assert result.value("oracle_agreement_greedy") == final["greedy"]["agreement"]
    assert result.value("probe_r2") == probes[-1]["r2_pooled"]["value"]
    fractions = [result.value(f"greedy_action_fraction/{a}") for a in task.ACTION_NAMES]
    assert fractions == final["greedy"]["fractions"]
    run = report.StudyRun(leaf=leaf.label, seed=7, run_id="run", budget="smoke", result=result)
    row = report.our_row(run)
    assert row.startswith("| ours `run` (smoke) | 7 | 2,048 |") and row.count("|") == 12
