"""The flagship's incremental R² (issue 52 item 1): the in-run stage's record and headline on a
saved module's rollouts (no training; a finished run's: `rl-harness analyze`), and the window
reading exactly what the agent read (never the belief the observation may show)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import controls, incremental, probing
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

from rl_harness.analysis import FitMemo, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import untrained_agent
from tests.study.test_belief_geometry_controls import PLAN, SEED, _settings


def test_the_stage_writes_the_record_and_its_headline():
    agent, make_env = untrained_agent()
    settings, layout = _settings(make_env)
    greedy = controls.data_set("agent_greedy", agent, settings, PLAN)
    control = probing.untrained_module(
        reward_only.module_spec(), make_env, stream_seed(SEED, "study", "untrained")
    )
    probe = incremental.agent_probe(greedy, layout, PLAN, SEED)
    branching = controls.action_branching(
        greedy.observations[..., layout.tokens],
        greedy.observations[..., layout.actions],
        probe.train_episodes,
        probe.test_episodes,
    )
    untrained = replay_rollouts(control, greedy, steps_per_call=probing.REPLAY_STEPS)
    record = incremental.measure(
        greedy,
        untrained,
        agent=probe,
        branchings=branching.labels,
        layout=layout,
        plan=PLAN,
        say=lambda message: None,
    )
    # As the analysis runs it (issue 53 item 2): the controls' window fits kept in a memo,
    # the incremental test reads its windows alone (a) from it: one fit per k not trained
    # again, the record the same bit for bit.
    memo = FitMemo()
    controls.score_on(
        greedy,
        untrained,
        layout=layout,
        plan=PLAN,
        seed=SEED,
        data="agent_greedy",
        say=lambda message: None,
        agent=probe,
        memo=memo,
    )
    shared = incremental.measure(
        greedy,
        untrained,
        agent=probe,
        branchings=branching.labels,
        layout=layout,
        plan=PLAN,
        say=lambda message: None,
        memo=memo,
    )
    assert memo.reads == PLAN.window_k_max
    assert json.dumps(shared, sort_keys=True) == json.dumps(record, sort_keys=True)
    record = json.loads(json.dumps(record))  # as probe_metrics.json holds it
    assert record["n_episodes"] == PLAN.probe_episodes
    assert record["branchings"] == [probing.TOKEN_BRANCHES, probing.ACTION_BRANCHES]
    table = record["table"]
    assert table["ks"] == list(range(1, PLAN.window_k_max + 1))
    # The window reads the 3 token and 2 action columns (+ a presence flag) per lag.
    assert [row["n_inputs"] for row in table["rows"]] == [6 * k for k in table["ks"]]
    top = incremental.headline(record)
    for index, k in enumerate(table["ks"]):
        row, line = table["rows"][index], (lambda name, k=k: top.value(f"k{k}/{name}"))
        b_minus_a = line("agent_increment")
        assert b_minus_a == pytest.approx(line("r2_agent") - line("r2_window"))
        assert line("agent_minus_control") == pytest.approx(line("r2_agent") - line("r2_control"))
        assert top[f"k{k}/agent_increment"].low == row["agent_increment"]["r2_pooled"]["low"]
        holm = table["p_values_holm"]["agent_increment"]["global"]
        assert line("agent_increment_p_holm") == holm[index]
        assert row["p_values"]["agent_increment"]["global"] <= holm[index]


def test_the_window_never_reads_the_belief_the_observation_shows():
    """belief_observation's observation carries the decision belief: the windows read only
    the token and action parts, so a representation that copies the belief still has its
    full increment over the window."""
    make_env = probing.probe_env_factory(decision_belief_in_observation=True)
    module = probing.untrained_module(reward_only.module_spec(), make_env, seed=3)
    env = make_env(1)
    layout, space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(PLAN, SEED, make_env, space)
    rollouts = controls.data_set("agent_greedy", module, settings, PLAN)
    belief = rollouts.observations[..., layout.decision_belief]
    np.testing.assert_allclose(belief, rollouts.targets, atol=1e-6)  # shown in the observation
    copy = dataclasses.replace(rollouts, representations=belief)
    probe = incremental.agent_probe(copy, layout, PLAN, SEED)
    record = incremental.measure(
        copy, belief, agent=probe, branchings={}, layout=layout, plan=PLAN, say=lambda m: None
    )
    for row in record["table"]["rows"]:
        assert row["agent_residual_columns"] == 3  # the belief is not in the window's span
        assert row["agent"]["r2_pooled"]["value"] > row["window"]["r2_pooled"]["value"]


def _headline_run(root, arm: str, run_id: str, seed: int, values: dict[int, float] | None):
    """A finished run's folder whose result.json holds an incremental headline with the given
    agent increment per k (b - c: half of it); None: a run from before the test."""
    folder = root / arm / "results" / run_id
    folder.mkdir(parents=True)
    (folder / "run_manifest.json").write_text(
        json.dumps({"run_id": run_id, "seed": seed, "status": "completed"})
    )
    result = {}
    if values is not None:
        result[incremental.KEY] = {
            f"k{k}": {
                "agent_increment": {"value": v, "low": v - 0.01, "high": v + 0.01},
                "agent_minus_control": {"value": v / 2, "low": 0.0, "high": v},
                "agent_increment_within_branch": {"value": -v, "low": -v, "high": -v},
                "agent_minus_control_within_branch": None,
            }
            for k, v in values.items()
        }
    (folder / "result.json").write_text(json.dumps(result))
    return folder


def test_the_synthesis_table_tests_each_k_across_seeds_with_holm_over_k(tmp_path):
    from experiments.mess3_belief_geometry.synthesis import experiment as synthesis
    from scipy import stats

    per_seed = [{1: 0.1, 2: 0.01}, {1: 0.2, 2: -0.02}, {1: 0.3, 2: 0.04}]
    folders = [
        _headline_run(tmp_path, "reward_only", f"run-{seed}", seed, values)
        for seed, values in enumerate(per_seed)
    ]
    folders.append(_headline_run(tmp_path, "reward_only", "old-run", 9, None))
    table = synthesis.incremental_table(folders)
    entry = table["arms"]["reward_only"]
    assert entry["seeds"] == [0, 1, 2] and entry["missing"] == ["old-run"]
    rows = entry["quantities"]["agent_increment"]
    assert [row["k"] for row in rows] == [1, 2]
    # k = 1: 0.1, 0.2, 0.3: mean 0.2, t = 0.2 / (0.1 / sqrt 3) on 2 degrees of freedom.
    assert rows[0]["mean"] == pytest.approx(0.2) and rows[0]["n"] == 3
    p1 = stats.t.sf(0.2 / (0.1 / np.sqrt(3)), 2)
    values2 = np.array([0.01, -0.02, 0.04])
    p2 = stats.t.sf(values2.mean() / (values2.std(ddof=1) / np.sqrt(3)), 2)
    assert rows[0]["p"] == pytest.approx(p1) and rows[1]["p"] == pytest.approx(p2)
    # Holm over the k family: the smaller p times 2, the larger times 1 (kept monotone).
    assert rows[0]["p_holm"] == pytest.approx(min(1.0, 2 * p1))
    assert rows[1]["p_holm"] == pytest.approx(max(2 * p1, p2))
    # b - c: half of b - a, the same t statistics; within branches: the negated values.
    halves = entry["quantities"]["agent_minus_control"]
    assert halves[0]["mean"] == pytest.approx(0.1) and halves[0]["p"] == pytest.approx(p1)
    within = entry["quantities"]["agent_increment_within_branch"]
    assert within[0]["p"] == pytest.approx(1 - p1)
    # A quantity no run has: no values, no p.
    missing = entry["quantities"]["agent_minus_control_within_branch"]
    assert missing[0]["n"] == 0 and missing[0]["p"] is None and missing[0]["p_holm"] is None
    text = synthesis.incremental_markdown(table)
    assert "missing in old-run" in text and "p_holm" in text
    assert "| reward_only | b - a (agent increment) | global | 1 | +0.2000 [" in text
