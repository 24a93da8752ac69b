"""Discrete-action HMM tasks: emission timing, rewards, exact ceilings, known answers."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import HMMEnv, HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import (
    GuessFeedbackTask,
    LogWeightTask,
    OneStepLookaheadPolicy,
    closed_loop_value,
    expected_rewards,
    one_step_threshold,
)
from rl_harness.envs.mess3 import control_chain_model, mess3_model
from tests.envs.helpers import ALL_INFO
from tests.envs.test_vector_env import run_side_by_side

TASKS = "rl_harness.envs.hmm.action_tasks"


def feedback_config(emission: str, **overrides) -> dict:
    config = {
        "model": "rl_harness.envs.mess3:mess3_model",
        "model_kwargs": {"x": 0.05, "alpha": 0.85},
        "task": f"{TASKS}:GuessFeedbackTask",
        "task_kwargs": {"emission": emission, "feedback": 0.1},
        "episode_length": 1024,
        "token_window": 1,
        "action_window": 1,
    }
    return config | overrides


SYMMETRY = {
    "model": "rl_harness.envs.mess3:control_chain_model",
    "model_kwargs": {"alpha": 0.85},
    "task": f"{TASKS}:LogWeightTask",
    "task_kwargs": {
        "emission": "on_enter",
        "log_weights": [[0, 0, 0], [0, 0, 1.5], [0, 0, -1.5]],
        "state_rewards": [0, 0, 1],
        "rewarded_state": "entered",
    },
    "observation_delay": 1,
    "token_window": 1,
    "action_window": 1,
}


# The original action-symmetry study's variant 2 (its own task file): noop; positive = +1.5
# on entering state 2 from states 0 and 1 but -1.5 from state 2; negative = -1.5 from every
# row. Variant 1 (SYMMETRY above) has +1.5 from every row.
VARIANT_2 = [
    [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
    [[0, 0, 1.5], [0, 0, 1.5], [0, 0, -1.5]],
    [[0, 0, -1.5], [0, 0, -1.5], [0, 0, -1.5]],
]
SYMMETRY_V2 = SYMMETRY | {"task_kwargs": SYMMETRY["task_kwargs"] | {"log_weights": VARIANT_2}}


def symmetry_task(log_weights) -> LogWeightTask:
    return LogWeightTask(control_chain_model(0.85), "on_enter", log_weights, [0, 0, 1], "entered")


@pytest.mark.parametrize(("emission", "known"), [("on_leave", 0.6996), ("on_enter", 0.7105)])
def test_feedback_study_bayes_optimal_accuracy_matches_the_known_answer(emission, known):
    # The feedback study's 1024-step episodes from the stationary start; the design notes'
    # numbers are 0.6996 (emit on leaving, the original) and 0.7105 (emit on entering).
    config = feedback_config(emission)
    policy = OneStepLookaheadPolicy(HMMEnv(config).task, "reward")
    result = closed_loop_value(config, policy, n_copies=256, n_steps=1024, seed=0)
    assert abs(result.value - known) < 1e-3
    assert abs(result.realized - result.value) < 0.01  # sampled rewards agree with the exact


def test_the_two_timings_are_different_problems():
    values = {}
    for emission in ("on_leave", "on_enter"):
        config = feedback_config(emission)
        policy = OneStepLookaheadPolicy(HMMEnv(config).task, "reward")
        values[emission] = closed_loop_value(config, policy, n_copies=128, n_steps=512, seed=1)
    assert values["on_enter"].value - values["on_leave"].value > 0.008


@pytest.mark.parametrize("emission", ["on_leave", "on_enter"])
def test_the_token_comes_from_the_chosen_state(emission):
    config = feedback_config(emission, info=["token", "state_before", "state"])
    env = HMMVectorEnv(64, config)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    hits_before = hits_after = n = 0
    for _ in range(300):
        _, _, _, _, info = env.step(rng.integers(0, 3, 64))
        live = info["token"] >= 0
        hits_before += int((info["token"] == info["state_before"])[live].sum())
        hits_after += int((info["token"] == info["state"])[live].sum())
        n += int(live.sum())
    # MESS3 emits the state's own token with probability alpha = 0.85.
    source = hits_before if emission == "on_leave" else hits_after
    assert abs(source / n - 0.85) < 0.01
    other = hits_after if emission == "on_leave" else hits_before
    assert other / n < 0.83  # the other state differs after ~10% of moves


@pytest.mark.parametrize("emission", ["on_leave", "on_enter"])
def test_vector_env_matches_single_envs(emission):
    config = feedback_config(emission, episode_length=7, observation_delay=1, info=ALL_INFO)
    assert run_side_by_side(config, n=4, n_steps=30, seed=5) > 0


def test_on_leave_guess_success_does_not_depend_on_the_guess_dynamics():
    task = GuessFeedbackTask(mess3_model(0.05, 0.85), emission="on_leave", feedback=0.1)
    beliefs = np.random.default_rng(0).dirichlet(np.ones(3), 50)
    emission = task.emission
    np.testing.assert_allclose(expected_rewards(task, beliefs), beliefs @ emission, atol=1e-12)
    entering = GuessFeedbackTask(mess3_model(0.05, 0.85), emission="on_enter", feedback=0.1)
    # On entering, guess a is right if the move (under U_a) enters a state emitting a.
    manual = np.stack(
        [beliefs @ entering.transitions[a] @ emission[:, a] for a in range(3)], axis=1
    )
    np.testing.assert_allclose(expected_rewards(entering, beliefs), manual, atol=1e-12)


def test_action_symmetry_facts():
    model = control_chain_model(0.85)
    env = HMMVectorEnv(16, SYMMETRY | {"info": ["decision_belief", "action", "state"]})
    _, info = env.reset(seed=0)
    rng = np.random.default_rng(1)
    seen = {0: [], 1: [], 2: []}
    for _ in range(200):
        actions = rng.integers(0, 3, 16)
        _, rewards, _, _, info = env.step(actions)
        for a in range(3):
            seen[a].append(info["decision_belief"][info["action"] == a, 2])
        live = info["action"] >= 0  # -1: the copy auto-reset at this step (reward 0)
        np.testing.assert_array_equal(rewards[live], (info["state"][live] == 2).astype(float))
    after = {a: np.concatenate(v) for a, v in seen.items()}
    # At delay 1 the decision belief after a move is the last full belief pushed through
    # it; the control chain enters state 2 with 0.10 from every row, so +1.5 gives
    # 0.1 e^1.5 / (0.9 + 0.1 e^1.5) = 0.3324 and nothing more.
    assert after[1].max() <= 0.33243 and abs(after[1].max() - 0.3324) < 1e-4
    np.testing.assert_allclose(after[0], 0.1, atol=1e-12)
    assert after[2].max() < 0.1
    task = env.task
    beliefs = np.random.default_rng(2).dirichlet(np.ones(3), 20)
    values = expected_rewards(task, beliefs)
    np.testing.assert_allclose(values[:, 1], 0.1 * np.e**1.5 / (0.9 + 0.1 * np.e**1.5))
    assert model.n_states == 3


def test_action_symmetry_threshold_known_answer():
    # The design notes' "the positive action beats noop until P(s = 2) > 0.7541": variant 2,
    # each action scored by its exact chance of entering state 2 on the coming move.
    task = symmetry_task(VARIANT_2)
    threshold = one_step_threshold(task, action=1, baseline=0, state=2)
    assert round(threshold, 4) == 0.7541
    up, stay = 0.1 * np.e**1.5, 0.1 * np.e**-1.5  # tilted weights of entering state 2
    by_hand = (up / (0.9 + up) - 0.1) / (up / (0.9 + up) - stay / (0.9 + stay))
    assert threshold == pytest.approx(by_hand, abs=1e-12)
    # The reading is the one-step oracle's: any belief, however split between states 0 and 1.
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0, 1, 400), threshold + np.array([-1e-9, 1e-9])])
    split = rng.uniform(0, 1, p.size)
    beliefs = np.stack([(1 - p) * split, (1 - p) * (1 - split), p], axis=1)
    values = expected_rewards(task, beliefs)
    np.testing.assert_array_equal(values[:, 1] > values[:, 0], p < threshold)
    # Variant 1 enters state 2 more often than noop from every state: no threshold.
    with pytest.raises(ValueError, match="does not win below a threshold"):
        one_step_threshold(
            symmetry_task(SYMMETRY["task_kwargs"]["log_weights"]), action=1, baseline=0, state=2
        )
    # Variant 3 (+1.5 from state 0, -1.5 from states 1 and 2): not a threshold in P(s = 2).
    variant_3 = [[[0, 0, 0]] * 3, [[0, 0, 1.5], [0, 0, -1.5], [0, 0, -1.5]], [[0, 0, -1.5]] * 3]
    with pytest.raises(ValueError, match="unequal"):
        one_step_threshold(symmetry_task(variant_3), action=1, baseline=0, state=2)


@pytest.mark.parametrize(("delay", "noop_region_reached"), [(1, False), (0, True)])
def test_action_symmetry_noop_region_needs_the_current_token(delay, noop_region_reached):
    # The original's variant-2 finding: at delay 1 every decision belief has been pushed
    # through a controlled move, so P(s = 2) <= 0.3324 < 0.7541 and the one-step oracle never
    # takes noop; at delay 0 the current token can lift the belief past the threshold.
    config = SYMMETRY_V2 | {"observation_delay": delay, "info": ["decision_belief"]}
    env = HMMVectorEnv(16, config)
    _, info = env.reset(seed=0)
    bound = env.task.transitions[:, :, 2].max()
    assert round(bound, 4) == 0.3324
    oracle = OneStepLookaheadPolicy(env.task, "reward")
    threshold = one_step_threshold(env.task, action=1, baseline=0, state=2)
    rng = np.random.default_rng(1)
    mass, chosen = [], []
    for _ in range(300):
        _, _, _, _, info = env.step(rng.integers(0, 3, 16))
        mass.append(info["decision_belief"][:, 2])
        chosen.append(oracle(info["decision_belief"]))
    mass, chosen = np.concatenate(mass), np.concatenate(chosen)
    np.testing.assert_array_equal(chosen == 0, mass > threshold)  # noop exactly above it
    if noop_region_reached:
        assert (chosen == 0).mean() > 0.01
    else:
        assert mass.max() <= bound + 1e-12 and abs(mass.max() - 0.3324) < 1e-3
        assert not (chosen == 0).any()


def test_bad_task_arguments_fail_clearly():
    with pytest.raises(TypeError, match="emission"):
        HMMEnv(feedback_config("on_leave", task_kwargs={"feedback": 0.1}))
    with pytest.raises(ValueError, match="emission must be one of"):
        HMMEnv(feedback_config("on_exit"))
    bad_state = SYMMETRY | {"task_kwargs": SYMMETRY["task_kwargs"] | {"rewarded_state": None}}
    with pytest.raises(ValueError, match="rewarded_state"):
        HMMEnv(bad_state)
    wrong = SYMMETRY | {
        "task": f"{TASKS}:ActionHMMTask",
        "task_kwargs": {
            "emission": "on_enter",
            "transitions": [np.eye(3).tolist()] * 2,
            "reward": "correct_guess",
        },
    }
    with pytest.raises(ValueError, match="one action per token"):
        HMMEnv(wrong)


@pytest.mark.parametrize("emission", ["on_leave", "on_enter"])
def test_delay_one_ceiling_is_exact_on_the_decision_belief(emission):
    # At delay 1 the decision belief lacks the newest token: the Bayes guesser does worse,
    # and its sampled rewards agree with the exact expected ones computed from that belief.
    delayed = feedback_config(emission, observation_delay=1)
    policy = OneStepLookaheadPolicy(HMMEnv(delayed).task, "reward")
    late = closed_loop_value(delayed, policy, n_copies=128, n_steps=1024, seed=2)
    now = closed_loop_value(feedback_config(emission), policy, n_copies=128, n_steps=1024, seed=2)
    assert late.value < now.value - 0.02
    assert abs(late.realized - late.value) < 0.006  # ~4.5 standard errors of the sampled mean


def test_a_window_as_long_as_the_episode_gives_the_exact_belief():
    from rl_harness.envs.hmm.action_tasks import window_pair_beliefs

    config = feedback_config(
        "on_leave", token_window=6, action_window=6, episode_length=50, info=["decision_belief"]
    )
    env = HMMVectorEnv(8, config)
    obs, info = env.reset(seed=4)
    rng = np.random.default_rng(0)
    layout = env.layout
    for _ in range(5):  # the window still holds the whole episode
        obs, _, _, _, info = env.step(rng.integers(0, 3, 8))
    window = obs[:, layout.tokens].reshape(8, 6, 3)
    acts = obs[:, layout.actions].reshape(8, 6, 3)
    tokens = np.where(window.sum(-1) > 0, window.argmax(-1), -1)
    actions = np.where(acts.sum(-1) > 0, acts.argmax(-1), -1)
    exact = window_pair_beliefs(env.task, tokens, actions, env.model.initial)
    np.testing.assert_allclose(exact, info["decision_belief"], atol=1e-12)
    short = window_pair_beliefs(env.task, tokens[:, :2], actions[:, :2], env.model.initial)
    assert np.abs(short - info["decision_belief"]).max() > 1e-3


def test_the_control_chain_starts_where_asked():
    seen = SYMMETRY | {"info": ["decision_belief"]}
    uniform = HMMVectorEnv(8, seen | {"model_kwargs": {"alpha": 0.85, "start": "uniform"}})
    stationary = HMMVectorEnv(8, seen)
    np.testing.assert_allclose(uniform.model.initial, np.full(3, 1 / 3))
    np.testing.assert_allclose(stationary.model.initial, [0.45, 0.45, 0.10], atol=1e-12)
    for env, share in ((uniform, 1 / 3), (stationary, 0.10)):
        _, info = env.reset(seed=0)  # the first decision belief is the start law itself
        assert abs(np.mean(info["decision_belief"][:, 2]) - share) < 1e-12
    with pytest.raises(ValueError, match="start must be one of"):
        control_chain_model(0.85, start="flat")


def test_a_lookahead_policy_names_its_objective_and_refuses_all_ties():
    left = LogWeightTask(
        control_chain_model(0.85), "on_enter", VARIANT_2, [0, 0, 1], rewarded_state="left"
    )
    with pytest.raises(ValueError, match="every action ties under objective 'reward'"):
        OneStepLookaheadPolicy(left, "reward")
    with pytest.raises(ValueError, match="objective must be one of"):
        OneStepLookaheadPolicy(left, "state")
    entered = OneStepLookaheadPolicy(left, "entered_state")
    # The state-entered objective on the state-left task is the state-entered task's reward.
    same = OneStepLookaheadPolicy(symmetry_task(VARIANT_2), "reward")
    beliefs = np.random.default_rng(0).dirichlet(np.ones(3), size=500)
    np.testing.assert_array_equal(entered(beliefs), same(beliefs))
    assert set(np.unique(entered(beliefs))) == {0, 1}  # noop above 0.7541, positive below
    guess = GuessFeedbackTask(mess3_model(x=0.05, alpha=0.85), "on_leave", 0.1)
    with pytest.raises(ValueError, match="needs a state reward"):
        OneStepLookaheadPolicy(guess, "entered_state")
