"""The incremental backfill reads a finished run as the run saw its task: at the run's own
operating point (a memory-point run's env is not the flagship's) and, with `--policy sample`,
on the agent's sampled rollouts (the policy it trained with), each the record the in-run
analysis writes under its key."""

from __future__ import annotations

import json

import numpy as np
import pytest
from experiments.mess3_belief_geometry import controls, incremental, probing, task
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only
from experiments.mess3_belief_geometry.reward_only_memory import experiment as memory_leaf

from rl_harness.analysis import collect_rollouts, load_module, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.test_belief_geometry_controls import SEED, _finished_run, _module


def _leaf_run(tmp_path, leaf: str):
    """A finished smoke run of `leaf` (an untrained module saved as its final checkpoint)."""
    agent, _ = _module()
    results, checkpoint = _finished_run(tmp_path, agent, SEED)
    manifest = json.loads((results / "run_manifest.json").read_text())
    manifest["experiment"]["module"] = f"{controls.STUDY}.{leaf}.experiment"
    (results / "run_manifest.json").write_text(json.dumps(manifest))
    return results, checkpoint


def _in_run(checkpoint, plan, point, policy: str) -> dict:
    """What analysis.py's stage writes for `policy` on the run's rollouts at `point`."""
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(False, point)
    env = make_env(1)
    layout, space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(plan, SEED, make_env, space)
    control = probing.untrained_module(
        reward_only.module_spec(), make_env, stream_seed(SEED, "study", "untrained")
    )
    say = lambda message: None  # noqa: E731
    if policy == "sample":
        rollouts = collect_rollouts(
            module,
            n_episodes=plan.probe_episodes,
            episode_steps=plan.probe_steps,
            policy="sample",
            **settings,
        )
        untrained = replay_rollouts(control, rollouts, steps_per_call=probing.REPLAY_STEPS)
        return incremental.measure_sampled(
            rollouts, untrained, layout=layout, plan=plan, seed=SEED, say=say
        )
    rollouts = controls.data_set("agent_greedy", module, settings, plan)
    untrained = replay_rollouts(control, rollouts, steps_per_call=probing.REPLAY_STEPS)
    probe = incremental.agent_probe(rollouts, layout, plan, SEED)
    branching = controls.action_branching(
        rollouts.observations[..., layout.tokens],
        rollouts.observations[..., layout.actions],
        probe.train_episodes,
        probe.test_episodes,
    )
    return incremental.measure(
        rollouts,
        untrained,
        agent=probe,
        branchings=branching.labels,
        layout=layout,
        plan=plan,
        say=say,
    )


def _written(results, key: str) -> dict:
    record = json.loads((results / "probe_metrics.json").read_text())[key]
    return {k: v for k, v in record.items() if k not in ("checkpoint", "wall_time_s")}


def test_a_memory_point_run_is_read_at_the_memory_point(tmp_path):
    results, checkpoint = _leaf_run(tmp_path, "reward_only_memory")
    assert incremental.main([str(results)]) == 0
    written = _written(results, incremental.KEY)
    plan = memory_leaf.SMOKE
    at_memory = json.loads(
        json.dumps(_in_run(checkpoint, plan, task.TASK_POINTS["memory"], "greedy"))
    )
    assert written == at_memory
    # The flagship's env gives another record: reading the run at the wrong point is visible.
    at_flagship = json.loads(json.dumps(_in_run(checkpoint, plan, task.FLAGSHIP, "greedy")))
    assert written["table"]["rows"] != at_flagship["table"]["rows"]


def test_the_sampled_reading_is_the_in_run_stage_and_leaves_the_greedy_one(tmp_path):
    results, checkpoint = _leaf_run(tmp_path, "reward_only")
    assert incremental.main([str(results), "--policy", "sample"]) == 0
    metrics = json.loads((results / "probe_metrics.json").read_text())
    assert incremental.KEY not in metrics  # the greedy record is its own key
    written = _written(results, incremental.KEY_SAMPLED)
    assert written["data"] == incremental.DATA_SAMPLED
    in_run = json.loads(json.dumps(_in_run(checkpoint, reward_only.SMOKE, task.FLAGSHIP, "sample")))
    assert written == in_run
    result = json.loads((results / "result.json").read_text())
    assert result[incremental.KEY_SAMPLED] == incremental.headline(metrics[incremental.KEY_SAMPLED])
    # The sampled rollouts are not the greedy ones: the two readings rest on different data.
    assert incremental.main([str(results)]) == 0
    greedy = _written(results, incremental.KEY)
    assert greedy["data"] == incremental.DATA
    rows = [
        np.asarray([r["window"]["r2_pooled"]["value"] for r in x["table"]["rows"]])
        for x in (greedy, written)
    ]
    assert not np.allclose(rows[0], rows[1])
    with pytest.raises(SystemExit):  # argparse refuses a policy it does not know
        incremental.main([str(results), "--policy", "random"])
