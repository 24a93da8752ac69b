"""The flagship's incremental R² (issue 52 item 1) through the paths a user takes: the backfill
command on a finished run (a saved module, no training) from a checkpoint it names, the record
and the headline it writes, the same numbers as the in-run stage, and the window reading
exactly what the agent read (never the belief the observation may show)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
from experiments.mess3_belief_geometry import controls, incremental, probing
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

from rl_harness.analysis import load_module, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.test_belief_geometry_controls import PLAN, SEED, _finished_run, _module, _settings


def test_backfill_from_a_named_checkpoint_writes_the_in_run_record(tmp_path):
    agent, make_env = _module()
    results, checkpoint = _finished_run(tmp_path, agent, SEED)
    # The coordinator's case: the run's own checkpoint is gone, a reproduced one is elsewhere.
    reproduced = tmp_path / "reproduced" / "iter_000001"
    shutil.copytree(checkpoint, reproduced)
    shutil.rmtree(checkpoint)
    assert incremental.main([str(results)]) == 2  # no checkpoint: one error line, exit 2
    assert incremental.main([str(results), "--checkpoint", str(tmp_path / "nowhere")]) == 2
    assert incremental.main([str(results), "--checkpoint", str(reproduced)]) == 0
    metrics = json.loads((results / "probe_metrics.json").read_text())
    result = json.loads((results / "result.json").read_text())
    assert metrics["recipe"] == "reward_only" and result["probe_r2"] == 0.5  # kept
    record = metrics[incremental.KEY]
    assert record["checkpoint"] == str(reproduced)
    assert record["n_episodes"] == PLAN.probe_episodes
    assert record["branchings"] == [probing.TOKEN_BRANCHES, probing.ACTION_BRANCHES]
    table = record["table"]
    assert table["ks"] == list(range(1, PLAN.window_k_max + 1))
    # The window reads the 3 token and 2 action columns (+ a presence flag) per lag.
    assert [row["n_inputs"] for row in table["rows"]] == [6 * k for k in table["ks"]]
    top = result[incremental.KEY]
    assert top == incremental.headline(record)
    for index, k in enumerate(table["ks"]):
        row, line = table["rows"][index], top[f"k{k}"]
        b_minus_a = line["agent_increment"]["value"]
        assert b_minus_a == pytest.approx(line["r2_agent"] - line["r2_window"])
        assert line["agent_minus_control"]["value"] == pytest.approx(
            line["r2_agent"] - line["r2_control"]
        )
        holm = table["p_values_holm"]["agent_increment"]["global"]
        assert line["agent_increment_p_holm"] == holm[index]
        assert row["p_values"]["agent_increment"]["global"] <= holm[index]

    # The in-run stage on the same rollouts gives the same record.
    module = load_module(reproduced)
    settings, layout = _settings(make_env)
    greedy = controls.data_set("agent_greedy", module, settings, PLAN)
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
    in_run = incremental.measure(
        greedy,
        replay_rollouts(control, greedy),
        agent=probe,
        branchings=branching.labels,
        layout=layout,
        plan=PLAN,
        say=lambda message: None,
    )
    assert json.loads(json.dumps(in_run)) == {
        k: v for k, v in record.items() if k not in ("checkpoint", "wall_time_s")
    }
    # Kept unless --overwrite.
    assert incremental.backfill(results, checkpoint=reproduced) is None


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
