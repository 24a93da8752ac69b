"""Discrete-action HMM tasks: one transition matrix per action, emission timing chosen
explicitly, named rewards, and the exact ceilings these tasks have.

A task here takes the env's model for three things only: the base chain P
(`model.transition_matrix`, what the transition builders modify), the per-state emission
E[s, k] (the model must be Moore form: each token depends on one state; `arrival_emission`)
and the initial law. Action a executes the row-stochastic U_a (rows = from, columns = to).

Emission timing is a required argument, because it changes the problem:

- "on_enter": the move s_t -> s_t+1 emits its token from the state it enters,
  T_a[k, i, j] = U_a[i, j] E[j, k]. The token the agent guesses is drawn from a state its
  action helped choose. This library's MESS3 (`mess3_model`) emits on entering.
- "on_leave": the move emits from the state it leaves, T_a[k, i, j] = E[i, k] U_a[i, j].
  The action cannot change the token of its own move. The original RL-Harness feedback study
  drew the token from the state the process leaves (and also emitted one token at reset,
  which this env never does: `info["token"]` is -1 at reset and the first move emits the
  first token).

On the feedback process (MESS3 x 0.05, alpha 0.85, U_a = 0.9 P + 0.1 R_a) the one-step
Bayes-optimal guesser is right 0.7002 of the time emitting on leaving and 0.7112 emitting
on entering (long run); see `closed_loop_value`.

Rewards are named (`REWARDS`): "correct_guess" (1 when the action equals the token the move
emits; needs as many actions as tokens) and "state" (`state_rewards[s]` for the state the
move enters, or the one it leaves: `rewarded_state`, required).

Ceilings: `expected_rewards(task, beliefs)` is the exact expected reward of every action
given a belief over the state the coming move leaves (the env's `info["decision_belief"]`
at decision time, any delay); its row maximum is the Bayes-optimal one-step value, so its
mean along an agent's own rollouts is that agent's Bayes-optimal guess accuracy.
`OneStepLookaheadPolicy(task, objective)` takes the argmax of an objective named explicitly
(`one_step_values`: the task's "reward", or "entered_state") and refuses a task whose
actions all tie; `one_step_threshold` is the belief mass on a
state where one action stops beating another one step ahead (the action-symmetry
study's 0.7541); `closed_loop_value` runs a belief policy in
the real vector env and averages the exact expected reward of its actions.
`counterfactual_beliefs` is the delay-0 filter step under any action (the exact target of
an input counterfactual that swaps the previous action).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.beliefs import window_beliefs
from rl_harness.envs.hmm.model import HMMModel
from rl_harness.envs.hmm.simulator import arrival_emission
from rl_harness.envs.hmm.task import Transition

EMISSIONS = ("on_enter", "on_leave")
REWARDS = ("correct_guess", "state")
REWARDED_STATES = ("entered", "left")


def _row_stochastic(matrices: np.ndarray, what: str) -> np.ndarray:
    if not np.all(np.isfinite(matrices)) or np.any(matrices < 0):
        raise ValueError(f"{what} must be finite and non-negative")
    sums = matrices.sum(axis=-1)
    worst = np.abs(sums - 1.0).argmax()
    if abs(sums.flat[worst] - 1.0) > 1e-9:
        raise ValueError(f"{what} rows must sum to 1; one sums to {sums.flat[worst]:.12g}")
    result: np.ndarray = matrices / sums[..., None]
    return result


def action_token_matrices(transitions: np.ndarray, emission: np.ndarray, timing: str) -> np.ndarray:
    """(n_actions, n_tokens, n_states, n_states) token matrices T_a[k, i, j] of the moves."""
    matrices: np.ndarray
    if timing == "on_enter":
        matrices = np.einsum("aij,jk->akij", transitions, emission)
        return matrices
    if timing == "on_leave":
        matrices = np.einsum("ik,aij->akij", emission, transitions)
        return matrices
    raise ValueError(f"emission must be one of {EMISSIONS}, got {timing!r}")


def mixture_feedback_transitions(base: np.ndarray, weight: float) -> np.ndarray:
    """U_a = (1 - weight) P + weight R_a with R_a[i, j] = 1[j == a]: action a pulls every row
    toward state a (the original feedback study's process with weight 0.1)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight!r}")
    n = base.shape[0]
    pull = np.broadcast_to(np.eye(n)[:, None, :], (n, n, n))  # (a, i, j): 1[j == a]
    return (1.0 - weight) * base[None] + weight * pull


def log_weight_transitions(base: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """U_a[i, j] = P[i, j] exp(W_a[i, j]) / Z_a[i]. `log_weights` is (n_actions, n_states):
    the same shift of entering each state from every row; or (n_actions, n_states, n_states)
    per source row."""
    weights = np.asarray(log_weights, dtype=np.float64)
    n = base.shape[0]
    if weights.ndim == 2 and weights.shape[1] == n:
        weights = np.broadcast_to(weights[:, None, :], (weights.shape[0], n, n))
    if weights.ndim != 3 or weights.shape[1:] != (n, n) or not np.all(np.isfinite(weights)):
        raise ValueError(
            f"log_weights must be finite, of shape (n_actions, {n}) or (n_actions, {n}, {n}), "
            f"got shape {weights.shape}"
        )
    tilted = base[None] * np.exp(weights)
    result: np.ndarray = tilted / tilted.sum(axis=2, keepdims=True)
    return result


class ActionHMMTask:
    """A Discrete task with one transition matrix per action (see the module docstring).

    Arguments: `emission` ("on_enter" or "on_leave", required), `transitions`
    (n_actions, n_states, n_states) nested lists, `reward` ("correct_guess" or "state"),
    and for the state reward `state_rewards` (n_states,) and `rewarded_state` ("entered" or
    "left"). Subclasses build `transitions` from the model's chain.
    """

    reward_components: tuple[str, ...] = ("reward",)

    def __init__(
        self,
        model: HMMModel,
        emission: str,
        transitions: np.ndarray | Sequence[Any],
        reward: str,
        state_rewards: Sequence[float] | None = None,
        rewarded_state: str | None = None,
    ) -> None:
        if emission not in EMISSIONS:
            raise ValueError(f"emission must be one of {EMISSIONS}, got {emission!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        n = model.n_states
        matrices = np.asarray(transitions, dtype=np.float64)
        if matrices.ndim != 3 or matrices.shape[1:] != (n, n) or matrices.shape[0] < 1:
            raise ValueError(
                f"transitions must have shape (n_actions, {n}, {n}), got {matrices.shape}"
            )
        self.transitions = _row_stochastic(matrices, "transitions")
        self.emission_timing = emission
        self.emission = arrival_emission(model, type(self).__name__)  # (s, k)
        self.reward_name = reward
        n_actions = self.transitions.shape[0]
        self.action_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(n_actions)
        self._controls = action_token_matrices(self.transitions, self.emission, emission)
        if reward == "correct_guess":
            if n_actions != model.n_tokens:
                raise ValueError(
                    f"the correct-guess reward needs one action per token ({model.n_tokens}), "
                    f"got {n_actions} actions"
                )
            if state_rewards is not None or rewarded_state is not None:
                raise ValueError("state_rewards and rewarded_state belong to the state reward")
            self.state_rewards = None
        else:
            values = np.asarray(state_rewards, dtype=np.float64)
            if state_rewards is None or values.shape != (n,) or not np.all(np.isfinite(values)):
                raise ValueError(f"the state reward needs state_rewards: {n} finite numbers")
            if rewarded_state not in REWARDED_STATES:
                raise ValueError(
                    f"the state reward needs rewarded_state in {REWARDED_STATES}, "
                    f"got {rewarded_state!r}"
                )
            self.state_rewards = values
        self.rewarded_state = rewarded_state
        self.reward_components = (reward,)

    def control_matrices(self) -> np.ndarray:
        return self._controls

    def reward(
        self, actions: np.ndarray, transition: Transition
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if self.state_rewards is None:
            value = (actions == transition.token).astype(np.float64)
        elif self.rewarded_state == "entered":
            value = self.state_rewards[transition.state]
        else:
            value = self.state_rewards[transition.state_before]
        return value, {self.reward_name: value}


class GuessFeedbackTask(ActionHMMTask):
    """Guess the token of the coming move; the guess a pulls the chain toward state a:
    U_a = (1 - feedback) P + feedback R_a, R_a[i, j] = 1[j == a]. Reward 1 for a correct
    guess. Needs n_tokens == n_states (a token names a state, as in MESS3)."""

    def __init__(self, model: HMMModel, emission: str, feedback: float) -> None:
        if model.n_tokens != model.n_states:
            raise ValueError(
                f"GuessFeedbackTask needs n_tokens == n_states, got {model.n_tokens} tokens "
                f"and {model.n_states} states"
            )
        transitions = mixture_feedback_transitions(model.transition_matrix, float(feedback))
        super().__init__(model, emission, transitions, "correct_guess")


class LogWeightTask(ActionHMMTask):
    """Action a adds `log_weights[a]` to the log-weights of the moves (per entered state, or
    per source row and entered state; `log_weight_transitions`); reward `state_rewards` of
    the `rewarded_state`.

    The original action-symmetry study (control chain, effect 1.5, reward 1 in state 2) had
    three variants of its positive action; noop and the negative action (-1.5 on entering
    state 2 from every row) are common to all. Variant 1: +1.5 from every row,
    log_weights [[0, 0, 0], [0, 0, 1.5], [0, 0, -1.5]]. Variant 2, the one its facts
    "after a controlled move P(s = 2) <= 0.3324" and "the positive action beats noop until
    P(s = 2) > 0.7541" describe: +1.5 from states 0 and 1 but -1.5 from state 2, per source
    row [[[0, 0, 0]] * 3, [[0, 0, 1.5], [0, 0, 1.5], [0, 0, -1.5]], [[0, 0, -1.5]] * 3]
    (`one_step_threshold` gives 0.7541; under variant 1 the positive action enters state 2
    more often than noop from every state, so it has no threshold)."""

    def __init__(
        self,
        model: HMMModel,
        emission: str,
        log_weights: Sequence[Any],
        state_rewards: Sequence[float],
        rewarded_state: str,
    ) -> None:
        transitions = log_weight_transitions(model.transition_matrix, np.asarray(log_weights))
        super().__init__(model, emission, transitions, "state", state_rewards, rewarded_state)


# ---------------------------------------------------------------------- exact ceilings


def expected_rewards(task: ActionHMMTask, beliefs: np.ndarray) -> np.ndarray:
    """(..., n_actions) exact expected reward of each action given beliefs (..., n_states)
    over the state the coming move leaves (`info["decision_belief"]` at decision time)."""
    b = np.asarray(beliefs, dtype=np.float64)
    if task.state_rewards is None:
        n = task.transitions.shape[0]
        guessed = task.control_matrices()[np.arange(n), np.arange(n)].sum(axis=2)  # (a, i)
        result: np.ndarray = b @ guessed.T
        return result
    if task.rewarded_state == "left":
        value = b @ task.state_rewards
        return np.repeat(value[..., None], task.transitions.shape[0], axis=-1)
    return b @ (task.transitions @ task.state_rewards).T


def one_step_threshold(task: ActionHMMTask, *, action: int, baseline: int, state: int) -> float:
    """The mass P(s = `state`) of the decision belief at which `action` stops beating
    `baseline` one step ahead: `action` is better exactly below it.

    The reading, stated exactly: b is a belief over the state s_t that the coming move
    leaves (`info["decision_belief"]`, either delay); each action is scored by the exact
    chance that its move enters `state`, (b @ U_a)[state] = P(s_t+1 = state | b, a). That
    is one step ahead, gamma 0, before any token of the move, and the same number
    `expected_rewards` gives with state_rewards 1[s == state] and rewarded_state "entered"
    (the original action-symmetry study rewarded the state a move leaves, so this is the
    reward of its next step: its "next-state occupancy objective"). The comparison depends
    on b only through p = b[state] when the gain g_i = U_action[i, state] -
    U_baseline[i, state] is the same from every other state i (g_out; g_in from `state`
    itself): the gain is (1 - p) g_out + p g_in, zero at p = g_out / (g_out - g_in).

    On the original's variant 2 (`LogWeightTask` docstring) on the control chain, positive
    against noop: g_out = 0.3324 - 0.1, g_in = 0.0242 - 0.1, threshold 0.7541. It needs
    only the transitions (not the emission, timing or delay). Raises ValueError when the
    gain differs between the other states (no threshold in p alone) or unless g_out > 0 >
    g_in (one sign: one action always wins, no threshold; g_out < 0 < g_in: `baseline`
    wins below the point, so swap the two).
    """
    n_actions, n_states, _ = task.transitions.shape
    for name, value, size in (
        ("action", action, n_actions),
        ("baseline", baseline, n_actions),
        ("state", state, n_states),
    ):
        if not 0 <= value < size:
            raise ValueError(f"{name} must be in [0, {size}), got {value!r}")
    gain = task.transitions[action, :, state] - task.transitions[baseline, :, state]
    others = np.delete(gain, state)
    if np.ptp(others) > 1e-12:
        raise ValueError(
            f"action {action} gains {others.round(6).tolist()} over action {baseline} from the "
            f"states other than {state}: unequal, so the comparison is not a threshold in "
            f"P(s = {state}) alone"
        )
    g_out, g_in = float(others[0]), float(gain[state])
    if not g_out > 0.0 > g_in:
        raise ValueError(
            f"action {action} gains {g_out:.6g} over action {baseline} from the other states "
            f"and {g_in:.6g} from state {state}: it does not win below a threshold (no sign "
            f"change, or the baseline wins below it: swap them)"
        )
    return g_out / (g_out - g_in)


OBJECTIVES = ("reward", "entered_state")


def one_step_values(task: ActionHMMTask, beliefs: np.ndarray, objective: str) -> np.ndarray:
    """(..., n_actions) what a one-step policy maximises, given decision beliefs (...,
    n_states): "reward" is the task's own reward of the coming move (`expected_rewards`);
    "entered_state" scores `state_rewards` of the state the move enters, whatever
    `rewarded_state` says (the original action-symmetry study's "myopic oracle": it
    rewarded the state a move leaves, under which every action ties one step ahead)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective == "reward":
        return expected_rewards(task, beliefs)
    if task.state_rewards is None:
        raise ValueError(
            f"objective 'entered_state' needs a state reward; this task's is {task.reward_name!r}"
        )
    b = np.asarray(beliefs, dtype=np.float64)
    return b @ (task.transitions @ task.state_rewards).T


@dataclass(frozen=True)
class OneStepLookaheadPolicy:
    """The action of largest one-step value for each belief (ties: lowest index), for an
    `objective` stated explicitly (`one_step_values`): "reward" (the task's own reward; for
    the correct-guess reward the Bayes-optimal guesser) or "entered_state". With a state
    reward it is myopic (the best policy for gamma 0, not for gamma > 0).

    A task whose actions all tie under the objective for every belief (the state a move
    leaves, scored one step ahead, does not depend on the action) is refused with a
    ValueError: its argmax would silently pick action 0 everywhere."""

    task: ActionHMMTask
    objective: str

    def __post_init__(self) -> None:
        # The values are linear in the belief: the actions tie everywhere exactly when they
        # tie at every corner of the simplex.
        corners = one_step_values(self.task, np.eye(self.task.transitions.shape[1]), self.objective)
        if np.all(np.ptp(corners, axis=1) <= 1e-12):
            raise ValueError(
                f"every action ties under objective {self.objective!r} for every belief "
                f"(reward {self.task.reward_name!r}, rewarded_state "
                f"{self.task.rewarded_state!r}): a one-step policy has nothing to choose; "
                "pick the objective you mean (e.g. 'entered_state')"
            )

    def __call__(self, beliefs: np.ndarray) -> np.ndarray:
        return one_step_values(self.task, beliefs, self.objective).argmax(axis=-1)


@dataclass(frozen=True)
class ClosedLoopValue:
    """A belief policy's reward per step in the real env: `value` averages the exact
    expected reward of its chosen actions (no sampling noise from the reward itself),
    `standard_error` is over env copies; `realized` is the sampled reward per step."""

    value: float
    standard_error: float
    realized: float
    n_copies: int
    n_steps: int


def closed_loop_value(
    env_config: Mapping[str, Any],
    policy: Callable[[np.ndarray], np.ndarray],
    *,
    n_copies: int,
    n_steps: int,
    seed: int,
) -> ClosedLoopValue:
    """Run `policy` (decision beliefs (n, n_states) -> actions (n,)) for `n_steps` steps of
    `n_copies` copies of `HMMVectorEnv(env_config)` (an `ActionHMMTask`; "decision_belief"
    is added to its info). Episodes restart from the model's initial law, so with episodes
    shorter than the run the value includes each episode's start."""
    from rl_harness.envs.hmm.vector_env import HMMVectorEnv  # the env builds on this module

    config = dict(env_config)
    config["info"] = sorted(set(config.get("info", [])) | {"decision_belief"})
    env = HMMVectorEnv(n_copies, config)
    if not isinstance(env.task, ActionHMMTask):
        raise TypeError(f"closed_loop_value needs an ActionHMMTask, got {config['task']!r}")
    _, info = env.reset(seed=seed)
    expected = np.zeros(n_copies)
    realized = np.zeros(n_copies)
    restarting = np.zeros(n_copies, dtype=bool)
    counted = np.zeros(n_copies)
    for _ in range(n_steps):
        beliefs = info["decision_belief"]
        actions = np.asarray(policy(beliefs), dtype=np.int64)
        scores = expected_rewards(env.task, beliefs)[np.arange(n_copies), actions]
        live = ~restarting  # the step after truncation only resets (reward 0)
        _, rewards, _, truncated, info = env.step(actions)
        expected += np.where(live, scores, 0.0)
        realized += np.where(live, rewards, 0.0)
        counted += live
        restarting = truncated
    per_copy = expected / counted
    return ClosedLoopValue(
        value=float(per_copy.mean()),
        standard_error=float(per_copy.std(ddof=1) / np.sqrt(n_copies)),
        realized=float(realized.sum() / counted.sum()),
        n_copies=n_copies,
        n_steps=n_steps,
    )


def counterfactual_beliefs(
    task: ActionHMMTask, previous: np.ndarray, actions: np.ndarray, tokens: np.ndarray
) -> np.ndarray:
    """normalize(b T_a[o]): the delay-0 belief after the move from belief `previous`
    (..., n_states) under `actions` (...) that emitted `tokens` (...). With the recorded
    action it is the env's own filter step; with another action, the exact belief the agent
    would hold had it taken that action and seen the same token (a counterfactual target)."""
    matrices = task.control_matrices()[np.asarray(actions), np.asarray(tokens)]
    moved = np.einsum("...i,...ij->...j", np.asarray(previous, dtype=np.float64), matrices)
    result: np.ndarray = moved / moved.sum(axis=-1, keepdims=True)
    return result


def window_pair_beliefs(
    task: ActionHMMTask, tokens: np.ndarray, actions: np.ndarray, initial: np.ndarray
) -> np.ndarray:
    """(..., n_states): the exact filter that sees only a window of (token, action) pairs,
    started from `initial` (a memory yardstick). `tokens` and `actions` are (..., m) codes,
    newest first, -1 where the window is still empty; position p holds the token emitted by
    the move under action p. The window's step matrices fed to `beliefs.window_beliefs`
    (an empty position is the identity: it carries nothing)."""
    tokens = np.asarray(tokens)
    actions = np.asarray(actions)
    controls = task.control_matrices()
    matrices = controls[np.clip(actions, 0, None), np.clip(tokens, 0, None)]
    seen = (tokens >= 0)[..., None, None]
    matrices = np.where(seen, matrices, np.eye(matrices.shape[-1]))[..., ::-1, :, :]
    return window_beliefs(matrices, initial, tokens.shape[-1])[..., -1, :]
