"""Controlled processes whose state, token and action counts all differ (4 states, 2 tokens,
3 actions), against brute force.

MESS3 and the control chain have 3 states and 3 tokens, so a table indexed with the state
count where the token count belongs (or the other way round) cannot show there. Here every
belief the env reports is checked against Bayes over all enumerated state paths, every move
against the control tensor, the move frequencies against their exact probabilities, and the
observation parts against the history they encode.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

from rl_harness.envs.hmm import Control, HMMEnv, HMMModel, HMMVectorEnv, Transition

N_STATES, N_TOKENS, N_ACTIONS = 4, 2, 3
INFO = ["token", "state_before", "state", "belief", "decision_belief", "action"]


def _control_tensor() -> np.ndarray:
    """(action, token, from, to): sparse (so a wrong table row soon makes an impossible move),
    each (action, from) row a distribution over (token, to)."""
    rng = np.random.default_rng(31)
    tensor = rng.random((N_ACTIONS, N_TOKENS, N_STATES, N_STATES)) + 0.2
    tensor *= rng.random(tensor.shape) < 0.55
    tensor[:, 0, np.arange(N_STATES), np.arange(N_STATES)] += 0.3  # no empty row
    return tensor / tensor.sum(axis=(1, 3))[:, None, :, None]


CONTROLS = _control_tensor()
INITIAL = np.array([0.1, 0.2, 0.3, 0.4])


class SwitchedTask:
    """Action a runs the process with token matrices CONTROLS[a]; no reward."""

    reward_components: tuple[str, ...] = ()

    def __init__(self, model: HMMModel) -> None:
        self.action_space = gym.spaces.Discrete(N_ACTIONS)

    def control_matrices(self) -> np.ndarray:
        return CONTROLS

    def reward(self, actions: np.ndarray, transition: Transition):
        return np.zeros(len(actions)), {}


def discrete_config(**overrides) -> dict:
    config = {
        # The model's own matrices (action 0's) are replaced by the task's per action.
        "model": {"token_matrices": CONTROLS[0].tolist(), "initial": INITIAL.tolist()},
        "task": f"{__name__}:SwitchedTask",
        "episode_length": 6,
        "token_window": 2,
        "action_window": 2,
        "include_belief": True,
        "include_state": True,
        "include_decision_belief": True,
        "info": INFO,
    }
    return config | overrides


def enumerated_belief(actions: list[int], tokens: list[int], seen: int) -> np.ndarray:
    """P(s_t | first `seen` tokens, all t actions), summing over every state path s_0..s_t:
    the first `seen` steps weighted by CONTROLS[a, token], the rest by the transition alone."""
    t = len(actions)
    paths = np.array(list(itertools.product(range(N_STATES), repeat=t + 1))).reshape(-1, t + 1)
    weight = INITIAL[paths[:, 0]]
    for m in range(t):
        step = CONTROLS[actions[m]]
        step = step[tokens[m]] if m < seen else step.sum(axis=0)
        weight = weight * step[paths[:, m], paths[:, m + 1]]
    posterior = np.bincount(paths[:, -1], weights=weight, minlength=N_STATES)
    return posterior / posterior.sum()


def one_hot(index: int, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.float32)
    if index >= 0:
        out[index] = 1.0
    return out


@pytest.mark.parametrize("delay", [0, 2])
def test_beliefs_moves_and_observation_match_enumeration(delay):
    env = HMMEnv(discrete_config(observation_delay=delay))
    layout = env.layout
    sizes = [s.stop - s.start for s in (layout.tokens, layout.actions, layout.belief)]
    assert sizes == [2 * N_TOKENS, 2 * N_ACTIONS, N_STATES]
    rng = np.random.default_rng(delay)
    for seed in range(4):
        obs, info = env.reset(seed=seed)
        actions: list[int] = []
        tokens: list[int] = []
        fulls = [INITIAL]
        for t in range(7):
            seen = max(t - delay, 0)
            np.testing.assert_allclose(info["belief"], fulls[t], atol=1e-12)
            np.testing.assert_allclose(
                info["decision_belief"], enumerated_belief(actions, tokens, seen), atol=1e-12
            )
            # The observation: newest-first token window lagged by the delay, newest-first
            # executed actions, the full belief of `delay` steps ago, the state.
            visible = tokens[:seen][::-1]
            expected = [one_hot(visible[i] if i < len(visible) else -1, N_TOKENS) for i in (0, 1)]
            np.testing.assert_array_equal(obs[layout.tokens], np.concatenate(expected))
            recent = actions[::-1]
            expected = [one_hot(recent[i] if i < len(recent) else -1, N_ACTIONS) for i in (0, 1)]
            np.testing.assert_array_equal(obs[layout.actions], np.concatenate(expected))
            np.testing.assert_allclose(obs[layout.belief], fulls[max(t - delay, 0)], atol=1e-6)
            np.testing.assert_array_equal(obs[layout.state], one_hot(info["state"], N_STATES))
            np.testing.assert_allclose(obs[layout.decision_belief], info["decision_belief"])
            if t == 6:
                break
            action = int(rng.integers(N_ACTIONS))
            obs, _, _, _, info = env.step(action)
            # The move the env made is possible under the executed action's matrices.
            move = (action, info["token"], info["state_before"], info["state"])
            assert CONTROLS[move] > 0, f"impossible move {move} at step {t} of seed {seed}"
            assert info["action"] == action
            actions.append(action)
            tokens.append(info["token"])
            fulls.append(enumerated_belief(actions, tokens, len(tokens)))
            # The env's belief stays a distribution over the 4 states.
            assert info["belief"].shape == (N_STATES,)


def test_move_frequencies_follow_the_executed_actions_matrices():
    # One step of 6000 copies from their initial states, each action on a third of them:
    # (state before, token, state after) counts against initial[i] * CONTROLS[a, k, i, j].
    n = 6000
    env = HMMVectorEnv(n, discrete_config(episode_length=3))
    env.reset(seed=11)
    actions = np.arange(n) % N_ACTIONS
    info = env.step(actions)[4]
    for action in range(N_ACTIONS):
        mine = actions == action
        counts = np.zeros((N_TOKENS, N_STATES, N_STATES))
        np.add.at(counts, (info["token"][mine], info["state_before"][mine], info["state"][mine]), 1)
        expected = INITIAL[None, :, None] * CONTROLS[action] * mine.sum()
        assert np.all(counts[expected == 0] == 0)
        # Binomial counts: within 5 standard deviations of their expectation.
        sd = np.sqrt(expected * (1 - expected / mine.sum()))
        assert np.all(np.abs(counts - expected) <= 5 * sd + 1e-9), (action, counts, expected)


# -- a continuous (Box) task on a 4-state, 2-token Moore model -----------------------------

BASE = np.array(
    [
        [0.5, 0.5, 0.0, 0.0],
        [0.0, 0.5, 0.5, 0.0],
        [0.0, 0.0, 0.5, 0.5],
        [0.5, 0.0, 0.0, 0.5],
    ]
)
BACK = BASE.T.copy()  # the cycle run backwards: also row-stochastic
EMISSION = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.05, 0.95]])  # (state, token)


class MixTask:
    """Action w in [0, 1] runs the chain (1 - w) BASE + w BACK; no reward."""

    reward_components: tuple[str, ...] = ()

    def __init__(self, model: HMMModel) -> None:
        self.action_space = gym.spaces.Box(0.0, 1.0, (1,), np.float64)

    def control(self, actions: np.ndarray) -> Control:
        w = actions[:, 0, None, None]
        return Control(actions, (1 - w) * BASE[None] + w * BACK[None])

    def reward(self, actions: np.ndarray, transition: Transition):
        return np.zeros(len(actions)), {}


def test_continuous_task_beliefs_use_the_emission_of_the_state_entered():
    model = HMMModel.from_transition_emission(BASE, EMISSION, INITIAL)
    config = {
        "model": {"token_matrices": model.token_matrices.tolist(), "initial": INITIAL.tolist()},
        "task": f"{__name__}:MixTask",
        "episode_length": 6,
        "token_window": 1,
        "info": ["token", "state_before", "state", "belief"],
    }
    env = HMMEnv(config)
    rng = np.random.default_rng(0)
    for seed in range(3):
        info = env.reset(seed=seed)[1]
        ws: list[float] = []
        tokens: list[int] = []
        for t in range(6):
            w = float(rng.uniform())
            info = env.step(np.array([w]))[4]
            chain = (1 - w) * BASE + w * BACK
            assert chain[info["state_before"], info["state"]] > 0
            ws.append(w)
            tokens.append(info["token"])
            # Enumerate paths: P(s_0) prod chain_m(s_m, s_m+1) E(s_m+1, token_m).
            paths = np.array(list(itertools.product(range(N_STATES), repeat=t + 2)))
            weight = INITIAL[paths[:, 0]]
            for m, (wm, token) in enumerate(zip(ws, tokens, strict=True)):
                chain_m = (1 - wm) * BASE + wm * BACK
                weight = weight * chain_m[paths[:, m], paths[:, m + 1]]
                weight = weight * EMISSION[paths[:, m + 1], token]
            expected = np.bincount(paths[:, -1], weights=weight, minlength=N_STATES)
            np.testing.assert_allclose(info["belief"], expected / expected.sum(), atol=1e-12)
