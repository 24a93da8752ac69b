"""The incremental test on the agent's sampled rollouts (the policy it trained with) beside the
greedy one, as the in-run analysis stage computes it, and at the run's own operating point."""

from __future__ import annotations

import json

import numpy as np
from experiments.mess3_belief_geometry import controls, incremental, probing, task
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only
from experiments.mess3_belief_geometry.reward_only_memory import experiment as memory_leaf

from rl_harness.analysis import collect_rollouts, load_module, replay_rollouts
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import STAGE_RECORDS, untrained_agent, write_finished_run
from tests.study.test_belief_geometry_controls import SEED


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
    if policy == "sample":  # as analysis.py collects them
        rollouts = collect_rollouts(
            module,
            n_episodes=plan.probe_episodes,
            episode_steps=plan.probe_steps,
            policy="sample",
            **settings,
        )
    else:
        rollouts = controls.data_set("agent_greedy", module, settings, plan)
    untrained = replay_rollouts(control, rollouts, steps_per_call=probing.REPLAY_STEPS)
    data = incremental.DATA_SAMPLED if policy == "sample" else incremental.DATA
    return incremental.measure_with_own_probe(
        rollouts, untrained, layout=layout, plan=plan, seed=SEED, data=data, say=lambda m: None
    )


def test_the_sampled_reading_rests_on_the_sampled_rollouts_and_says_so(tmp_path):
    """The in-run stage's record on the sampled rollouts names its data, and its windows fit
    other data than the greedy record's (the two readings rest on different rollouts)."""
    agent, _ = untrained_agent()
    _, checkpoint = write_finished_run(tmp_path, agent, SEED, STAGE_RECORDS)
    sampled = json.loads(
        json.dumps(_in_run(checkpoint, reward_only.SMOKE, task.FLAGSHIP, "sample"))
    )
    greedy = json.loads(json.dumps(_in_run(checkpoint, reward_only.SMOKE, task.FLAGSHIP, "greedy")))
    assert sampled["data"] == incremental.DATA_SAMPLED and greedy["data"] == incremental.DATA
    assert sampled["n_episodes"] == greedy["n_episodes"] == reward_only.SMOKE.probe_episodes
    windows = [
        np.asarray([row["window"]["r2_pooled"]["value"] for row in record["table"]["rows"]])
        for record in (greedy, sampled)
    ]
    assert not np.allclose(windows[0], windows[1])
    # result.json's headline of the sampled record is the same function of its table.
    top = incremental.headline(sampled)
    assert {name.split("/")[0] for name in top} == {f"k{k}" for k in sampled["table"]["ks"]}


def test_a_memory_point_agent_is_read_at_the_memory_point(tmp_path):
    """The memory point's env is another task: the same module's records differ by point (the
    analysis reads each run at its budget's task_point, task.point_of)."""
    agent, _ = untrained_agent()
    _, checkpoint = write_finished_run(tmp_path, agent, SEED, STAGE_RECORDS)
    plan = memory_leaf.SMOKE
    assert task.point_of(plan) == task.TASK_POINTS["memory"]
    at_memory = json.loads(json.dumps(_in_run(checkpoint, plan, task.point_of(plan), "greedy")))
    at_flagship = json.loads(json.dumps(_in_run(checkpoint, plan, task.FLAGSHIP, "greedy")))
    assert at_memory["table"]["rows"] != at_flagship["table"]["rows"]
