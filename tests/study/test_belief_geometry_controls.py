"""Controls the trained agent cannot contaminate (issue 37, item 4), on known answers (the
bins, branchings and tokens-only windows are the library's: tests/analysis/test_controls.py):
a memoryless policy whose controls equal those on independently driven data, belief-MDP-driven
rollouts whose targets are the exact filter of what was executed, and the record of every
data set on a saved module (no training; a finished run's: `rl-harness analyze`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from experiments.mess3_belief_geometry import controls, probing, task
from experiments.mess3_belief_geometry.reward_only import experiment as reward_only

from rl_harness.analysis import replay_rollouts
from rl_harness.analysis.controls import TOKENS_ONLY_STREAM
from rl_harness.seeding import stream_seed
from tests.study.reward_only_runs import untrained_agent

SEED = 5
PLAN = reward_only.SMOKE


def _settings(make_env, seed: int = SEED):
    env = make_env(1)
    space, layout = env.single_action_space, env.layout
    env.close()
    return probing.rollout_settings(PLAN, seed, make_env, space), layout


def _memoryless(module):
    """A policy that ignores its memory (and everything else): the policy head zeroed, so
    the greedy action is the middle of the box, 0, at every step."""
    with torch.no_grad():
        for parameter in module.pi.parameters():
            parameter.zero_()
    return module


# ---------------------------------------------------------------------------- rollouts


@pytest.fixture(scope="module")
def greedy_and_layout():
    module, make_env = untrained_agent()
    settings, layout = _settings(make_env)
    return module, make_env, controls.data_set("agent_greedy", module, settings, PLAN), layout


def test_a_memoryless_policy_gives_controls_equal_to_independent_driving():
    """The agent's own rollouts contaminate controls only through its actions. A policy that
    ignores its memory (constant 0) and an independent actor playing the same constant give
    the same data, hence the same agent probe and the same controls, number for number."""
    module, make_env = untrained_agent()
    module = _memoryless(module)
    control, _ = untrained_agent(seed=12)
    settings, layout = _settings(make_env)
    own = controls.data_set("agent_greedy", module, settings, PLAN)
    assert np.all(own.actions == 0.0)

    def zero(obs, info):
        return np.zeros((obs.shape[0], 2), np.float32)

    # The module reading every step, as it reads its own play (the analysis replays an
    # actor's play 64 steps per call instead: equal to rounding, below).
    driven = controls.actor_rollouts(module, zero, settings | {"replay_steps": None}, PLAN)
    np.testing.assert_array_equal(driven.observations, own.observations)
    np.testing.assert_array_equal(driven.targets, own.targets)
    replayed = controls.actor_rollouts(module, zero, settings, PLAN)
    np.testing.assert_array_equal(replayed.observations, own.observations)
    np.testing.assert_allclose(replayed.representations, own.representations, rtol=1e-4, atol=1e-5)
    blocks = [
        controls.controls_on(
            rollouts,
            replay_rollouts(control, rollouts),
            layout=layout,
            plan=PLAN,
            seed=SEED,
            data=name,
            say=lambda message: None,
        )
        for name, rollouts in (("agent_greedy", own), ("belief_mdp", driven))
    ]
    first, second = ({k: v for k, v in b.items() if k != "data"} for b in blocks)
    assert first == second
    assert first["action_branching"]["branches_added_by_actions"] == 0  # constant actions


def _filter(targets: np.ndarray, tokens: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The exact decision belief at delay 1 (DESIGN.md), from the first recorded belief:
    b_{t+1} = normalize(b_t diag(E[:, o])) U_{a_t}, o the token newly visible at t + 1."""
    base = np.array([[0.75, 0.15, 0.10], [0.15, 0.75, 0.10], [0.45, 0.45, 0.10]])
    alpha = task.ALPHA
    emission = np.full((3, 3), (1 - alpha) / 2) + np.eye(3) * (alpha - (1 - alpha) / 2)
    shift = (np.arange(3)[None, :] - np.arange(3)[:, None]) % 3
    out = np.empty_like(targets)
    out[:, 0] = targets[:, 0]
    for t in range(targets.shape[1] - 1):
        a = np.clip(actions[:, t], -task.W_MAX, task.W_MAX)
        theta = np.concatenate([np.zeros((len(a), 1)), a], axis=1)
        tilted = base[None] * np.exp(theta[:, shift])  # (n, 3, 3)
        tilted /= tilted.sum(-1, keepdims=True)
        seen = out[:, t] * emission[:, tokens[:, t + 1]].T
        seen /= seen.sum(-1, keepdims=True)
        out[:, t + 1] = np.einsum("ni,nij->nj", seen, tilted)
    return out


def test_belief_mdp_rollouts_carry_the_exact_filtered_beliefs(greedy_and_layout, tmp_path):
    module, make_env, greedy, layout = greedy_and_layout
    settings, _ = _settings(make_env)
    policy = task.belief_mdp_policy(cache=tmp_path)  # the real solve (belief_vi, delay 1)
    driven = controls.data_set("belief_mdp", module, settings, PLAN, belief_policy=policy)
    # The executed actions are the policy's at each step's exact belief ...
    np.testing.assert_allclose(
        driven.actions.reshape(-1, 2), policy(driven.targets.reshape(-1, 3)), atol=1e-5
    )
    # ... the targets are the filter of the tokens seen and those actions ...
    tokens = driven.observations[..., layout.tokens].argmax(-1)
    filtered = _filter(driven.targets, tokens, driven.actions.astype(np.float64))
    np.testing.assert_allclose(driven.targets, filtered, atol=1e-6)
    # ... and the observation's action part is the previous executed action, not the agent's.
    assert not np.allclose(driven.actions, greedy.actions)
    scaled = (driven.actions[:, :-1] + task.W_MAX) / (2 * task.W_MAX)
    np.testing.assert_allclose(driven.observations[:, 1:, layout.actions], scaled, atol=1e-5)
    # Random play: uniform in the box, from the named stream (same seed, same actions).
    random = controls.data_set("random", module, settings, PLAN)
    again = controls.data_set("random", module, settings, PLAN)
    np.testing.assert_array_equal(random.actions, again.actions)
    assert np.all(np.abs(random.actions) <= task.W_MAX) and random.actions.std() > 2.0
    np.testing.assert_allclose(
        random.targets,
        _filter(
            random.targets,
            random.observations[..., layout.tokens].argmax(-1),
            random.actions.astype(np.float64),
        ),
        atol=1e-6,
    )


# ---------------------------------------------------------------------------- finished runs


@pytest.fixture(scope="module")
def belief_policy(tmp_path_factory):
    return task.belief_mdp_policy(cache=tmp_path_factory.mktemp("solver_cache"))


def test_controls_by_data_scores_every_control_on_each_data_set(belief_policy):
    agent, make_env = untrained_agent()
    control = probing.untrained_module(
        reward_only.module_spec(), make_env, stream_seed(SEED, "study", "untrained")
    )
    settings, _ = _settings(make_env)
    record = controls.controls_by_data(
        agent,
        control,
        make_env=make_env,
        plan=PLAN,
        seed=SEED,
        greedy=controls.data_set("agent_greedy", agent, settings, PLAN),
        belief_policy=belief_policy,
        say=lambda message: None,
    )
    record = json.loads(json.dumps(record))  # as probe_metrics.json holds it
    top = controls.headline(record)
    assert {name.split("/")[0] for name in top} == set(controls.DATA_SETS)
    for name in controls.DATA_SETS:
        block = record[name]
        assert block["data"] == controls.DATA[name]
        assert block["n_episodes"] == PLAN.probe_episodes
        assert block["episode_steps"] == PLAN.probe_steps
        assert [row["k"] for row in block["tokens_only_windows"]["windows"]] == [1, 2]
        assert block["tokens_only_windows"]["stream"] == list(TOKENS_ONLY_STREAM)
        assert set(block["differences"]) == {
            "agent_minus_untrained_module",
            "agent_minus_observation",
            "agent_minus_best_window",
            "agent_minus_best_tokens_window",
        }
        # Every score of a block is on that block's own held-out episodes.
        n_test = block["agent_probe"]["n_test_episodes"]
        assert n_test == round(probing.PROBE_TEST_FRACTION * PLAN.probe_episodes)
    # Different actions, different data: the three returns differ.
    assert len({top.value(f"{name}/return_per_step") for name in controls.DATA_SETS}) == 3
