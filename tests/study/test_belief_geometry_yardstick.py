"""The occupancy-control study's memory yardstick (issue 37 item 3), fast: the m-step filter
through the executed actions is the env's own decision belief once its window reaches the
reset (on the analysis' real rollouts: the action decoding, the warm-up history and the
reset step), the in-run stage's record, and the synthesis table lists each run (or names the
`rl-harness analyze` command that writes it)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry import yardstick as ys
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only
from experiments.mess3_belief_geometry.synthesis import experiment as synthesis

from rl_harness.analysis import load_module
from rl_harness.envs.mess3 import control_chain_model
from tests.study.reward_only_runs import untrained_agent, write_finished_run

SEED = 3
PLAN = reward_only.SMOKE


def _layout_and_bounds(make_env):
    env = make_env(1)
    space = env.single_action_space
    layout = env.layout
    env.close()
    return layout, float(space.low.flat[0]), float(space.high.flat[0])


def test_the_long_filter_is_the_decision_belief_and_short_ones_are_not():
    module, make_env = untrained_agent()
    rollouts = ys.greedy_rollouts(module, PLAN, SEED, make_env)
    layout, low, high = _layout_and_bounds(make_env)
    prior = control_chain_model(task.ALPHA).initial
    steps = PLAN.warmup_steps + PLAN.probe_steps
    beliefs = ys.filter_beliefs_by_m(rollouts, layout, low, high, prior, [1, 2, steps])
    np.testing.assert_allclose(beliefs[steps], rollouts.targets, atol=1e-5)  # float32 obs
    assert np.abs(beliefs[1] - rollouts.targets).max() > 1e-2
    # m = 1 is the prior measured by the newest visible token, moved by the previous action.
    assert beliefs[1].shape == rollouts.targets.shape


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished smoke run of reward_only as its folder holds it: the agent saved as the
    final checkpoint (an untrained module: no training), probe_metrics.json's budget/task."""
    agent, _ = untrained_agent()
    probe_metrics = {
        "recipe": "reward_only",
        "budget": PLAN.__dict__,
        "task": {"decision_belief_in_observation": False},
    }
    return write_finished_run(
        tmp_path_factory.mktemp("run"), agent, SEED, {"probe_metrics.json": probe_metrics}
    )


@pytest.mark.slow  # over a minute on 2 busy cores (5 untrained replays)
def test_the_stage_writes_the_yardstick_record(finished_run):
    results, checkpoint = finished_run
    # The in-run stage on analyze's greedy rollouts (a finished run's: `rl-harness analyze`).
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(decision_belief_in_observation=False)
    greedy = ys.greedy_rollouts(module, PLAN, SEED, make_env)
    record = ys.measure(
        results,
        plan=PLAN,
        seed=SEED,
        label="reward_only",
        module=module,
        decision_belief_in_observation=False,
        greedy=greedy,
        say=lambda message: None,
    )
    written = json.loads((results / ys.YARDSTICK_FILE).read_text())
    assert written["recipe"] == "reward_only" and written["seed"] == SEED
    assert set(written["filters_r2_within_branch"]) == {"stationary", "policy"}
    assert set(written["filters_r2_within_branch"]["stationary"]) == {
        f"m{m}" for m in range(1, ys.M_MAX + 1)
    }
    assert written["untrained"]["r2_within_branch"]["n"] == ys.UNTRAINED_SEEDS
    assert len(set(written["untrained"]["seeds"])) == ys.UNTRAINED_SEEDS
    assert set(written["random_features_r2_within_branch"]) == {
        f"width{w}" for w in ys.RANDOM_WIDTHS
    }
    assert written["priors"]["stationary"] == pytest.approx([0.45, 0.45, 0.10])
    assert set(written["competing_explanations"]) >= {"filters", "actions", "mlp"}
    assert ys.headline(record)["equivalent_memory"] == written["equivalent_memory"]
    # The synthesis lists the run with its numbers.
    table = synthesis.yardstick_markdown(
        [{"arm": "reward_only", "seed": SEED, "run": "run-1", "record": written}]
    )
    assert "| reward_only | 3 |" in table and "missing" not in table
    # Columns in numeric order whatever the file's key order (JSON keys are sorted).
    widths = " / ".join(
        f"{written['random_features_r2_within_branch'][f'width{w}']:.3f}" for w in ys.RANDOM_WIDTHS
    )
    assert widths in table


def test_synthesis_says_how_to_analyze_a_run_without_a_yardstick(tmp_path):
    folder = tmp_path / "reward_only" / "results" / "run-2"
    folder.mkdir(parents=True)
    (folder / "run_manifest.json").write_text(json.dumps({"seed": 1}))
    rows = synthesis.yardstick_rows([folder])
    assert rows == [{"arm": "reward_only", "seed": 1, "run": "run-2", "record": None}]
    assert (
        "missing: `rl-harness analyze experiments.mess3_belief_geometry.reward_only.experiment "
        "run-2`" in synthesis.yardstick_markdown(rows)
    )
