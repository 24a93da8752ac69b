"""The batched core of `HMMEnv` and `HMMVectorEnv`: n copies of the process stepped at once.

Both envs run this same code (the single env with n = 1), so a copy's trajectory depends only
on its own seed. Everything is validated and tabulated at construction; a step is a fixed
sequence of NumPy calls over all copies, with no per-copy Python loop.

Randomness per copy comes from named streams of the reset seed (rl_harness.seeding):
"state" (initial and next hidden state), "emission" (token given the move), "episode_length"
(the randomized first episode length). Every call on a copy, reset or step, consumes exactly
one "state" and one "emission" uniform (a reset discards its emission draw), which keeps all
copies' streams in lockstep, so an auto-reset inside a batch matches a single env's reset.
A new source of randomness gets a new stream name, so adding one never moves these draws.

Continuous tasks (`ContinuousTask`, a Box action space) set each copy's transition matrix per
step: the next state is an inverse-CDF draw from the row of the state before the move (the
same one "state" uniform), the token one from the model's emission of the state entered.

Beliefs (each computed only when asked for): the full-information belief over the current
state given every token so far (filtered through each step's executed transition), and the
decision belief given only what the agent has seen under `observation_delay = d` (tokens up
to the one emitted on arrival in the state d steps ago, and its own executed actions): the
full belief of d steps ago pushed through the last d executed transitions without tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.config import HMMEnvConfig, build_model, build_task
from rl_harness.envs.hmm.history import NewestFirstHistory
from rl_harness.envs.hmm.model import HMMModel
from rl_harness.envs.hmm.sampling import CategoricalTable
from rl_harness.envs.hmm.streams import LockstepUniforms
from rl_harness.envs.hmm.task import ContinuousTask, Task, Transition
from rl_harness.seeding import stream_rng

# One copy's (or a batch's) observation: the flat array, or with dict_observation its parts.
type Observation = np.ndarray | dict[str, np.ndarray]


@dataclass(frozen=True)
class ObservationLayout:
    """Where each part sits in the flat float32 observation (empty slices for parts left out).

    tokens: newest-first one-hot window (token_window x n_tokens; all zeros before any token);
    actions: newest-first previous executed actions (action_window x n_actions one-hot for a
    Discrete task; action_window x dim for a Box task, each scaled to [0, 1] by the box
    bounds, zeros before any action);
    belief: exact belief (lagged by observation_delay); state: one-hot hidden state (privileged);
    decision_belief: the decision belief (info["decision_belief"]: what the agent's own
    history determines), last so the other parts keep their places.
    """

    tokens: slice
    actions: slice
    belief: slice
    state: slice
    size: int
    decision_belief: slice = slice(0, 0)


def _layout(config: HMMEnvConfig, model: HMMModel, action_size: int) -> ObservationLayout:
    sizes = (
        config.token_window * model.n_tokens,
        config.action_window * action_size,
        model.n_states if config.include_belief else 0,
        model.n_states if config.include_state else 0,
        model.n_states if config.include_decision_belief else 0,
    )
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    slices = [slice(bounds[i], bounds[i + 1]) for i in range(5)]
    tokens, actions, belief, state, decision_belief = slices
    return ObservationLayout(
        tokens, actions, belief, state, size=int(bounds[-1]), decision_belief=decision_belief
    )


def observation_parts(
    config: HMMEnvConfig, layout: ObservationLayout, n_tokens: int, action_size: int
) -> dict[str, tuple[slice, tuple[int, ...]]]:
    """The named parts of the flat observation (those present), each with its slice and its
    shape in a Dict observation: windows are 2-D (positions, features), newest first."""
    parts = {
        "tokens": (layout.tokens, (config.token_window, n_tokens)),
        "actions": (layout.actions, (config.action_window, action_size)),
        "belief": (layout.belief, (layout.belief.stop - layout.belief.start,)),
        "state": (layout.state, (layout.state.stop - layout.state.start,)),
        "decision_belief": (
            layout.decision_belief,
            (layout.decision_belief.stop - layout.decision_belief.start,),
        ),
    }
    return {name: part for name, part in parts.items() if part[0].stop > part[0].start}


def observation_space(
    config: HMMEnvConfig, layout: ObservationLayout, n_tokens: int, action_size: int
) -> gym.Space[Any]:
    """One copy's observation space: a flat Box, or (dict_observation) a Dict of Boxes."""
    if not config.dict_observation:
        return gym.spaces.Box(0.0, 1.0, (layout.size,), np.float32)
    parts = observation_parts(config, layout, n_tokens, action_size)
    return gym.spaces.Dict(
        {name: gym.spaces.Box(0.0, 1.0, shape, np.float32) for name, (_, shape) in parts.items()}
    )


def split_observation(
    obs: np.ndarray, parts: dict[str, tuple[slice, tuple[int, ...]]]
) -> dict[str, np.ndarray]:
    """Flat observations (..., size) as the Dict observation's named parts (views)."""
    lead = obs.shape[:-1]
    return {name: obs[..., part].reshape(*lead, *shape) for name, (part, shape) in parts.items()}


def _one_hot_table(n: int) -> np.ndarray:
    # Row n (reached by index -1) is all zeros: the encoding of "no token/action yet".
    return np.vstack([np.eye(n, dtype=np.float32), np.zeros((1, n), dtype=np.float32)])


def arrival_emission(model: HMMModel, task_name: str) -> np.ndarray:
    """E[j, k] = P(token k | the move enters state j), for a model whose token depends only on
    the state entered (Moore form, T[k, i, j] = P[i, j] E[j, k]); raises for other models."""
    p = model.transition_matrix
    ratio = model.token_matrices.transpose(1, 2, 0) / np.where(p > 0, p, 1.0)[..., None]
    reached = p > 0  # (i, j): moves that can happen
    k = model.n_tokens
    emission = np.full((model.n_states, k), 1.0 / k)
    for j in range(model.n_states):  # construction time only
        rows = ratio[reached[:, j], j]
        if rows.size:
            if np.abs(rows - rows[0]).max() > 1e-9:
                raise ValueError(
                    f"task {task_name!r} sets the transition, so the model must emit each token "
                    f"from the state it enters (Moore form); {model.name!r} does not"
                )
            emission[j] = rows[0] / rows[0].sum()
    return emission


def _control_tables(model: HMMModel, task: Task) -> np.ndarray | None:
    matrices = task.control_matrices()
    if matrices is None:
        return None
    matrices = np.asarray(matrices, dtype=np.float64)
    expected = (task.action_space.n, model.n_tokens, model.n_states, model.n_states)
    if matrices.shape != expected:
        raise ValueError(f"task control matrices must have shape {expected}, got {matrices.shape}")
    for action, tensor in enumerate(matrices):
        try:  # reuse the model's validation for each action's dynamics
            HMMModel(tensor, model.initial, name=f"{model.name} under action {action}")
        except ValueError as error:
            raise ValueError(f"task control matrices for action {action}: {error}") from error
    return matrices


class BatchSimulator:
    """n copies of one HMM env. Call `reset(seeds)` first, then `step(actions)` repeatedly.

    `step` auto-resets copies whose previous step ended the episode (gymnasium's next-step
    autoreset): their action is ignored and they return the reset observation, reward 0.
    """

    @property
    def needs_reset(self) -> np.ndarray:
        """(n,) bool: copies whose episode ended at the latest step."""
        return self._needs_reset.copy()

    def __init__(self, config: HMMEnvConfig, n: int) -> None:
        if n < 1:
            raise ValueError(f"number of env copies must be positive, got {n}")
        self.config = config
        self.n = n
        self.model = build_model(config)
        self.task = build_task(config, self.model)
        self.action_space = self.task.action_space
        self.continuous = isinstance(self.action_space, gym.spaces.Box)
        s, k = self.model.n_states, self.model.n_tokens
        if isinstance(self.action_space, gym.spaces.Box):  # self.continuous
            self.n_actions = 0
            self._action_shape = tuple(self.action_space.shape)
            self._low = np.asarray(self.action_space.low, dtype=np.float64)
            self._high = np.asarray(self.action_space.high, dtype=np.float64)
            action_size = self._action_shape[0]
        else:
            self.n_actions = int(self.action_space.n)
            self._action_shape = ()
            action_size = self.n_actions
        self.layout = _layout(config, self.model, action_size)
        self.observation_space = observation_space(config, self.layout, k, action_size)
        # Named parts of the flat observation: `split_observation(flat, sim.parts)` is the
        # Dict observation (analysis records flat arrays and splits them for the module).
        self.parts = observation_parts(config, self.layout, k, action_size)
        self.reward_components = tuple(self.task.reward_components)

        if self.continuous:
            self._controlled = True
            emission = arrival_emission(self.model, config.task)
            self._arrival_table = CategoricalTable(emission)
            self._emission_by_token = np.ascontiguousarray(emission.T)  # (k, s)
        else:
            # build_task pairs a Discrete action space with a Task (task.py's protocols).
            controls = _control_tables(self.model, cast(Task, self.task))
            self._controlled = controls is not None
            if controls is None:
                controls = self.model.token_matrices[None]
            transitions = controls.sum(axis=1)  # (n_controls, s, s)
            with np.errstate(divide="ignore", invalid="ignore"):
                # P(token | move i -> j); moves of probability 0 never happen: uniform.
                emission = controls.transpose(0, 2, 3, 1) / transitions[..., None]
            emission = np.where(transitions[..., None] > 0, emission, 1.0 / k)
            # Flat row indices: transitions by control * s + before, emissions by that * s +
            # after, belief matrices by control * k + token.
            self._transition_table = CategoricalTable(transitions)
            self._emission_table = CategoricalTable(emission)
            self._belief_matrices = controls.reshape(-1, s, s)
            self._transitions = transitions
        self._initial_table = CategoricalTable(self.model.initial)
        self._token_table = _one_hot_table(k)
        self._action_table = _one_hot_table(self.n_actions) if not self.continuous else None
        self._state_table = np.eye(s, dtype=np.float32)
        delay, window = config.observation_delay, config.token_window
        self._want_decision = "decision_belief" in config.info or config.include_decision_belief
        self._want_matrix = "transition_matrix" in config.info or (
            self._want_decision and delay > 0
        )
        self._track_belief = config.include_belief or "belief" in config.info
        self._track_belief = self._track_belief or self._want_decision
        self._want_action = "action" in config.info

        self._token_history = NewestFirstHistory(n, window + delay if window else 0)
        if self.continuous:
            self._action_history = NewestFirstHistory(
                n, config.action_window, self._action_shape, np.float64, 0.0
            )
        else:
            self._action_history = NewestFirstHistory(n, config.action_window)
        self._belief = np.tile(self.model.initial, (n, 1))
        lag = delay if config.include_belief else 0
        self._belief_history = np.tile(self.model.initial, (n, lag + 1, 1))
        # Decision belief: full beliefs of the last d + 1 steps and the last d executed
        # transitions, newest first (identity before the first move).
        self._identity = np.eye(s)
        decision_lag = delay if self._want_decision else 0
        self._full_history = np.tile(self.model.initial, (n, decision_lag + 1, 1))
        self._matrix_history = np.tile(self._identity, (n, decision_lag, 1, 1))
        self._decision = self._belief.copy()
        self._executed_action = self._no_action(n)
        self._executed_matrix = np.tile(self._identity, (n, 1, 1))
        self._state = np.zeros(n, dtype=np.int64)
        self._t = np.zeros(n, dtype=np.int64)
        self._length = np.full(n, config.episode_length, dtype=np.int64)
        self._needs_reset = np.zeros(n, dtype=bool)
        self._any_needs_reset = False
        self._seeded = np.zeros(n, dtype=bool)
        # Placeholder generators: `reset` seeds every copy before its first draw is used.
        placeholders = [np.random.default_rng(0) for _ in range(n)]
        self._state_uniforms = LockstepUniforms(placeholders)
        self._emission_uniforms = LockstepUniforms(placeholders)
        self._minus_ones = np.full(n, -1, dtype=np.int64)
        self._copies = np.arange(n)

    def _no_action(self, n: int) -> np.ndarray:
        """The "action" info before any move: -1 (Discrete) or zeros (Box)."""
        if self.continuous:
            return np.zeros((n, *self._action_shape))
        return np.full(n, -1, dtype=np.int64)

    # ------------------------------------------------------------------ seeding and reset

    def _seed_copy(self, index: int, seed: int | None) -> None:
        # A SeedSequence made without entropy draws one int (its `entropy`).
        root = cast(int, np.random.SeedSequence().entropy) if seed is None else seed
        state_rng = stream_rng(root, "state")
        emission_rng = stream_rng(root, "emission")
        self._state_uniforms.replace(index, state_rng)
        self._emission_uniforms.replace(index, emission_rng)
        length = self.config.episode_length
        if self.config.random_first_episode_length:
            length = int(stream_rng(root, "episode_length").integers(1, length + 1))
        self._length[index] = length
        self._seeded[index] = True

    def reset(self, seeds: list[int | None]) -> tuple[Observation, dict[str, Any]]:
        """Reset every copy; copy i is reseeded when seeds[i] is an int (or never seeded)."""
        if len(seeds) != self.n:
            raise ValueError(f"expected {self.n} seeds, got {len(seeds)}")
        self._length[:] = self.config.episode_length
        for index, seed in enumerate(seeds):
            if seed is not None or not self._seeded[index]:
                self._seed_copy(index, seed)
        u_state = self._state_uniforms.next()
        self._emission_uniforms.next()  # consumed for lockstep, see module docstring
        everyone = np.ones(self.n, dtype=bool)
        self._reset_copies(everyone, u_state)
        self._needs_reset[:] = False
        self._any_needs_reset = False
        zeros = np.zeros(self.n)
        info = self._info(self._minus_ones, {name: zeros for name in self.reward_components})
        return self._observe(), info

    def _reset_copies(self, mask: np.ndarray, u_state: np.ndarray) -> None:
        u = u_state[mask]
        self._state[mask] = self._initial_table.draw(np.zeros(u.shape, dtype=np.int64), u)
        self._t[mask] = 0
        self._token_history.clear(mask)
        self._action_history.clear(mask)
        self._belief[mask] = self.model.initial
        self._belief_history[mask] = self.model.initial
        self._full_history[mask] = self.model.initial
        self._matrix_history[mask] = self._identity
        self._decision[mask] = self.model.initial
        self._executed_action[mask] = self._no_action(1)[0]
        self._executed_matrix[mask] = self._identity

    # ------------------------------------------------------------------ stepping

    def _check_box_actions(self, actions: object, single: bool) -> np.ndarray:
        shape = self._action_shape
        expected = shape if single else (self.n, *shape)
        what = f"task {self.config.task!r} expects actions of shape {expected}"
        try:
            array = np.asarray(actions, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{what}, got non-numeric {actions!r}") from error
        if single:
            if array.shape != shape:
                raise ValueError(f"{what}, got shape {array.shape}")
            array = array[None]
        elif array.shape != expected:
            raise ValueError(f"{what}, got shape {array.shape}")
        if self._any_needs_reset:
            # Copies about to auto-reset ignore their action; any value is accepted.
            array = np.where(self._needs_reset[:, None], self._low, array)
        if not np.isfinite(array).all():
            raise ValueError(f"{what} with finite values, got NaN or infinite entries")
        return np.clip(array, self._low, self._high)

    def check_actions(self, actions: object, single: bool = False) -> np.ndarray:
        """Validated actions for `step`: int64 (n,) for Discrete tasks; for Box tasks float64
        (n, *shape) clipped to the box (`single`: one copy's action without the batch axis)."""
        if self.continuous:
            return self._check_box_actions(actions, single)
        array = np.asarray(actions)
        if single:
            array = array.reshape(1)
        if array.shape != (self.n,):
            raise ValueError(f"expected actions of shape ({self.n},), got {array.shape}")
        if array.dtype != np.int64:
            if array.dtype.kind not in "iu":
                raise ValueError(f"actions must be integers, got dtype {array.dtype}")
            array = array.astype(np.int64)
        if self._any_needs_reset:
            # Copies about to auto-reset ignore their action; any value is accepted.
            array = np.where(self._needs_reset, 0, array)
        # One comparison checks both ends: negative values wrap to huge unsigned ones.
        if (array.view(np.uint64) >= self.n_actions).any():
            bad = array[(array < 0) | (array >= self.n_actions)][0]
            raise ValueError(f"action {bad} is outside the action space Discrete({self.n_actions})")
        return array

    def _move(
        self, actions: np.ndarray
    ) -> tuple[
        np.ndarray,
        np.ndarray,
        np.ndarray,
        np.ndarray | None,
        np.ndarray,
        np.ndarray,
        dict[str, np.ndarray],
    ]:
        """Executed actions, next states, tokens, executed matrices (or None), rewards."""
        u_state = self._state_uniforms.next()
        u_emission = self._emission_uniforms.next()
        before = self._state
        s = self.model.n_states
        if self.continuous:
            # build_task pairs a Box action space with a ContinuousTask (task.py's protocols).
            control = cast(ContinuousTask, self.task).control(actions)
            actions, matrices = control.actions, control.transition_matrices
            rows = matrices[self._copies, before]  # (n, s): the row of the state left
            cum = np.cumsum(rows, axis=1)
            state = (u_state[:, None] * cum[:, -1:] >= cum[:, :-1]).sum(axis=1)
            token = self._arrival_table.draw(state, u_emission)
        else:
            row = actions * s + before if self._controlled else before
            state = self._transition_table.draw(row, u_state)
            token = self._emission_table.draw(row * s + state, u_emission)
            matrices = None
            if self._want_matrix:
                which = actions if self._controlled else np.zeros_like(actions)
                matrices = self._transitions[which]
        transition = Transition(before, token, state, matrices if self.continuous else None)
        rewards, components = self.task.reward(actions, transition)
        return actions, state, token, matrices, u_state, rewards, components

    def _filter(self, actions: np.ndarray, token: np.ndarray, matrices: np.ndarray | None) -> None:
        if self.continuous:
            assert matrices is not None  # _move always builds them for a Box task
            moved = np.matmul(self._belief[:, None, :], matrices)[:, 0]
            moved *= self._emission_by_token[token]
        else:
            k = self.model.n_tokens
            which = actions * k + token if self._controlled else token
            chosen = np.take(self._belief_matrices, which, axis=0)
            moved = np.matmul(self._belief[:, None, :], chosen)[:, 0]
        self._belief = moved / moved.sum(axis=1, keepdims=True)
        if self._belief_history.shape[1] > 1:
            self._belief_history[:, 1:] = self._belief_history[:, :-1]
        self._belief_history[:, 0] = self._belief
        if not self._want_decision:
            return
        d = self._matrix_history.shape[1]
        if d == 0:
            self._decision = self._belief
            return
        self._full_history[:, 1:] = self._full_history[:, :-1]
        self._full_history[:, 0] = self._belief
        self._matrix_history[:, 1:] = self._matrix_history[:, :-1]
        self._matrix_history[:, 0] = matrices
        # Full belief of d steps ago, pushed through the d executed moves since (oldest first).
        decision = self._full_history[:, d]
        for lag in range(d - 1, -1, -1):
            decision = np.matmul(decision[:, None, :], self._matrix_history[:, lag])[:, 0]
        self._decision = decision

    def step(
        self, actions: np.ndarray
    ) -> tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every copy one step; `actions` must come from `check_actions`."""
        before = self._state
        actions, state, token, matrices, u_state, rewards, components = self._move(actions)
        if self._track_belief:
            self._filter(actions, token, matrices)
        if self._want_action:
            self._executed_action = actions
        if self._want_matrix:
            assert matrices is not None  # _move builds them whenever _want_matrix
            self._executed_matrix = matrices
        self._token_history.push(token)
        if self.config.action_window:
            if self.continuous:
                self._action_history.push((actions - self._low) / (self._high - self._low))
            else:
                self._action_history.push(actions)
        self._state = state
        self._t += 1

        if self._any_needs_reset:
            resetting = self._needs_reset
            self._executed_action = self._executed_action.copy()
            self._executed_matrix = self._executed_matrix.copy()
            self._reset_copies(resetting, u_state)
            rewards = np.where(resetting, 0.0, rewards)
            components = {name: np.where(resetting, 0.0, v) for name, v in components.items()}
            token = np.where(resetting, -1, token)
            before = np.where(resetting, -1, before)
        truncated = self._t >= self._length
        self._needs_reset = truncated
        self._any_needs_reset = bool(truncated.any())
        if self._any_needs_reset:  # the next episode of these copies has the full length
            self._length[truncated] = self.config.episode_length
        terminated = np.zeros(self.n, dtype=bool)
        info = self._info(before, components, token) if self.config.info else {}
        return self._observe(), np.asarray(rewards, dtype=np.float64), terminated, truncated, info

    # ------------------------------------------------------------------ outputs

    def _observe(self) -> Observation:
        layout, config = self.layout, self.config
        obs = np.empty((self.n, layout.size), dtype=np.float32)
        # mode="wrap" sends index -1 (nothing yet) to the table's last, all-zero row.
        if config.token_window:
            visible = self._token_history.window()[:, config.observation_delay :]
            out = obs[:, layout.tokens].reshape(self.n, config.token_window, -1)
            np.take(self._token_table, visible, axis=0, out=out, mode="wrap")
        if config.action_window:
            actions = self._action_history.window()
            if self.continuous:
                obs[:, layout.actions] = actions.reshape(self.n, -1)
            else:
                assert self._action_table is not None  # built for every Discrete task
                out = obs[:, layout.actions].reshape(self.n, config.action_window, -1)
                np.take(self._action_table, actions, axis=0, out=out, mode="wrap")
        if config.include_belief:
            obs[:, layout.belief] = self._belief_history[:, -1]
        if config.include_state:
            obs[:, layout.state] = self._state_table[self._state]
        if config.include_decision_belief:
            obs[:, layout.decision_belief] = self._decision
        if config.dict_observation:
            return split_observation(obs, self.parts)
        return obs

    def _info(
        self,
        state_before: np.ndarray,
        components: dict[str, np.ndarray],
        token: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """Infos in gymnasium's vector form: each key an (n, ...) array plus an all-True "_key"."""
        values = {
            "token": self._minus_ones if token is None else token,
            "state_before": state_before,
            "state": self._state,
            "belief": self._belief,
            "decision_belief": self._decision,
            "action": self._executed_action,
            "transition_matrix": self._executed_matrix,
        }
        info: dict[str, Any] = {}
        for key in self.config.info:
            if key == "reward_components":
                nested: dict[str, Any] = {}
                for name in self.reward_components:
                    nested[name] = np.array(components[name], dtype=np.float64)
                    nested[f"_{name}"] = np.ones(self.n, dtype=bool)
                info[key] = nested
            else:
                info[key] = values[key].copy()
            info[f"_{key}"] = np.ones(self.n, dtype=bool)
        return info
