"""Roll a trained RLModule through a batch of envs and record what a probe needs.

Everything domain-specific is injected: the env comes from a factory of gymnasium
`VectorEnv`s, the representation from an extractor called on the module (by default its
public `encode_step(batch)` when it has one, else `encode(batch)`), and the targets from an
extractor of the env's `info` (e.g. `info_target("decision_belief")`). Analysis never reads
private env or module attributes.

Stateful modules (`is_stateful()`) are stepped as RLlib's env runner steps them: one
observation at a time with a time axis of 1, STATE_IN batched from `get_initial_state()`
and each step's STATE_OUT fed back. A stateful module with its own per-step read exposes
`encode_step(batch) -> representation (N, d)` or `(representation, state_out)` taking one
step *without* a time axis (obs (N, *obs_shape) and STATE_IN), as
`StatefulTransformerActorCritic` does; others are read through `encode` of the one-step
batch. An extractor may also return a mapping of named (N, d) tensors (e.g.
`rl_harness.analysis.replay.residual_representations`, every block's residual); the
stepper then returns a dict of arrays (replay uses it; `collect_rollouts` takes one tensor).
An extractor that returns `(representation, state_out)` lets `ModuleStepper.read` (replay:
no actions) skip the forward pass.

Timing: record t pairs the module's representation after it has read observation t with
the info returned alongside observation t (reset info for t = 0), and the reward of the
action then taken. Each copy first plays `warmup_steps` unrecorded actions, then
`episode_steps` recorded ones; its episode must last that long.

Policies: "greedy" (the inference distribution made deterministic), "sample" (a draw from
the exploration distribution), "random" (uniform over the action space from a named
stream; the module still reads every observation, so its state and representations are
those of an agent watching random play). Discrete and Box actions alike. An `actor`
(obs, info -> env actions, e.g. an exact solver's policy of `info["decision_belief"]`)
replaces the module's choice the same way: the module reads what the actor's play shows it.

Observations are fed to the module as the env returns them (`preprocess` may turn a flat
array into a mapping of arrays, for a module that reads a Dict observation; the rollouts
record the env's flat arrays): recipes whose env-to-module
connectors transform observations must pass the same transform as `preprocess`, and those
whose module-to-env connectors rescale actions pass `action_transform` (for RLlib's default
Box handling, `rllib_action_transform(space)`). Recorded actions are what the env received;
where a transform mapped the module's own samples, those (what its `prev_actions` input read,
as RLlib's episode stores them) are kept too, in `Rollouts.module_actions`, for replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import torch

from rl_harness.analysis.module_api import (
    EncoderAPI,
    PolicyHeadsAPI,
    StepEncoderAPI,
    prev_action_width,
    require_api,
)
from rl_harness.seeding import stream_rng, stream_seed

if TYPE_CHECKING:
    from gymnasium import Space
    from gymnasium.vector import VectorEnv
    from ray.rllib.core.rl_module.rl_module import RLModule

# An extractor returns (N, d) (or (N, 1, d)), a mapping of named ones, or either paired with
# the module's state after the step (which lets a replay skip the forward pass).
RepresentationExtractor = Callable[["RLModule", dict[str, Any]], Any]
TargetExtractor = Callable[[Mapping[str, Any]], np.ndarray]
ActionTransform = Callable[[np.ndarray], np.ndarray]
# (observations (N, ...), the vector env's info) -> the N actions the env executes.
Actor = Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]
Policy = Literal["greedy", "sample", "random"]
POLICIES = ("greedy", "sample", "random")
DEFAULT_STREAM = ("analysis", "rollouts")

# RLlib's batch column names (ray.rllib.core.columns.Columns), spelled out so importing this
# module does not import RLlib.
OBS, STATE_IN, STATE_OUT = "obs", "state_in", "state_out"
ACTION_DIST_INPUTS = "action_dist_inputs"
PREV_ACTIONS = "prev_actions"  # rl_harness.learners.connectors.prev_action.PREV_ACTIONS


def step_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """A stateful one-step batch (time axis of 1) as one step without a time axis: what
    `encode_step` / `encode_step_residuals` take (obs, prev_actions squeezed, state kept)."""
    out = dict(batch)
    for key in (OBS, PREV_ACTIONS):
        if key in out:
            out[key] = out[key][:, 0]
    return out


def encode_representation(
    module: RLModule, batch: dict[str, Any]
) -> torch.Tensor | tuple[torch.Tensor, Any]:
    """The module's public per-step representation of the stepper's batch.

    A stateful module with `encode_step` (`StepEncoderAPI`) is read through it on the step
    without its time axis (what it returns: the representation, or (representation,
    state_out)); any other module through `encode(batch)` (`EncoderAPI`).
    """
    if isinstance(module, StepEncoderAPI) and module.is_stateful():
        return module.encode_step(step_batch(batch))
    if not isinstance(module, EncoderAPI):
        require_api(
            module,
            EncoderAPI,
            purpose="the default representation extractor (or pass an extractor that reads "
            "the module's representation through its public API)",
        )
    # require_api raised unless the module has `encode`.
    return cast(EncoderAPI, module).encode(batch)


def info_target(*keys: str) -> TargetExtractor:
    """Targets from a vector env's info: `info[key]` as float64 (num_envs, k_key) arrays,
    concatenated over `keys`. "a/b" reads the entry b of a dict-valued key a (e.g.
    "reward_components/occupancy")."""
    if not keys:
        raise ValueError("info_target needs at least one info key")

    def one(info: Mapping[str, Any], key: str) -> np.ndarray:
        head, _, rest = key.partition("/")
        if head not in info:
            known = sorted(k for k in info if not k.startswith("_"))
            raise KeyError(
                f"env info has no {head!r} (it has {known}); configure the env to report it"
            )
        mask = info.get(f"_{head}")
        if mask is not None and not np.all(mask):
            raise ValueError(f"env info {head!r} is missing for some copies")
        value = info[head]
        if rest:
            if not isinstance(value, Mapping) or rest not in value:
                inner = sorted(value) if isinstance(value, Mapping) else type(value).__name__
                raise KeyError(f"env info {head!r} has no entry {rest!r} (it has {inner})")
            value = value[rest]
        values = np.asarray(value, dtype=np.float64)
        return values.reshape(values.shape[0], -1)

    def extract(info: Mapping[str, Any]) -> np.ndarray:
        return np.concatenate([one(info, key) for key in keys], axis=1)

    return extract


def rllib_action_transform(
    action_space: Space[Any],
    *,
    normalize_actions: bool = True,
    clip_actions: bool = False,
    unclipped: bool = False,
) -> ActionTransform:
    """What RLlib's NormalizeAndClipActions connector does to module actions, batched:
    with `normalize_actions` (RLlib's default) Box actions are unsquashed from [-1, 1] to
    the space's bounds, else with `clip_actions` they are clipped to them.

    `unclipped`: the same map without its clipping (an action the connector would saturate
    goes past the bound): the affine low + (a + 1) (high - low) / 2 with `normalize_actions`,
    else the identity. Interventions use it to read an action shift before saturation."""
    import gymnasium as gym
    from ray.rllib.utils.spaces.space_utils import clip_action, unsquash_action

    def transform(actions: np.ndarray) -> np.ndarray:
        if normalize_actions:
            return np.asarray(unsquash_action(actions, action_space))
        if clip_actions:
            return np.asarray(clip_action(actions, action_space))
        return actions

    def affine(actions: np.ndarray) -> np.ndarray:
        if not normalize_actions:
            return np.asarray(actions)
        if not isinstance(action_space, gym.spaces.Box):
            raise TypeError(f"an unclipped action map needs a Box action space, got {action_space}")
        low = np.asarray(action_space.low, dtype=np.float64)
        high = np.asarray(action_space.high, dtype=np.float64)
        shifted = np.asarray(actions, dtype=np.float64) + 1.0
        return np.asarray(low + shifted * (high - low) / 2.0, dtype=np.float64)

    return affine if unclipped else transform


def random_actions(space: Space[Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, ...) uniform actions of a Discrete, MultiDiscrete or bounded Box space."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return rng.integers(start, start + int(space.n), size=n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        draws = rng.integers(0, space.nvec, size=(n, *space.nvec.shape)) + space.start
        return np.asarray(draws, dtype=np.int64)
    if isinstance(space, gym.spaces.Box):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"random actions need a bounded Box, got {space}")
        draws = rng.uniform(space.low, space.high, size=(n, *space.shape))
        return draws.astype(space.dtype)
    raise TypeError(f"random actions support Discrete, MultiDiscrete and Box, got {space}")


@dataclass(frozen=True)
class Rollouts:
    """Per-episode records; the first axis is the episode, the second the step."""

    observations: np.ndarray  # (n_episodes, T, *obs_shape) as the env returned them
    representations: np.ndarray  # (n_episodes, T, d)
    targets: np.ndarray  # (n_episodes, T, k)
    actions: np.ndarray  # (n_episodes, T, *action_shape)
    rewards: np.ndarray  # (n_episodes, T)
    episode_ids: np.ndarray  # (n_episodes,) 0..n-1, in collection order
    episode_seeds: np.ndarray  # (n_episodes,) the reset seed of each episode
    # (n_episodes, warmup_steps, *obs_shape): what the module read before recording, so a
    # replay (`rl_harness.analysis.replay`) rebuilds the same carried state.
    warmup_observations: np.ndarray | None = None
    num_envs: int | None = None  # episodes stepped together (a replay may batch the same)
    # (n_episodes, warmup_steps, *action_shape): the actions of the warm-up steps, so a replay
    # of a module that reads the previous action feeds it what it read.
    warmup_actions: np.ndarray | None = None
    # Named (n_episodes, T, k) arrays recorded beside the targets but never probed (e.g. the
    # hidden state, for read-outs by state): `collect_rollouts(..., side={name: extractor})`.
    side: dict[str, np.ndarray] = field(default_factory=dict)
    # (n_episodes, warmup_steps + T, *action_shape): the actions as the module's own
    # `prev_actions` input read them (its samples, before `action_transform`), warm-up steps
    # first. Kept only where they differ from the executed `warmup_actions` / `actions`: the
    # module chose them and an `action_transform` mapped them to the env's units. A replay
    # feeds these (`replay.rollout_actions`), so it reads what stepping read.
    module_actions: np.ndarray | None = None

    @property
    def n_episodes(self) -> int:
        return int(self.representations.shape[0])

    @property
    def episode_steps(self) -> int:
        return int(self.representations.shape[1])

    def head(self, n_episodes: int, steps: int | None = None) -> Rollouts:
        """The first `n_episodes` episodes and (when given) first `steps` recorded steps;
        every per-episode array is cut alike (warm-up arrays by episode only, kept whole in
        steps), so a replay pairs each observation with the action it read."""
        if n_episodes > self.n_episodes or (steps or 0) > self.episode_steps:
            raise ValueError(
                f"asked for {n_episodes} episodes x {steps} steps; the rollouts hold "
                f"{self.n_episodes} x {self.episode_steps}"
            )
        t = slice(None) if steps is None else slice(steps)
        stepped = ("observations", "representations", "targets", "actions", "rewards")
        cut: dict[str, Any] = {name: getattr(self, name)[:n_episodes, t] for name in stepped}
        for name in ("episode_ids", "episode_seeds", "warmup_observations", "warmup_actions"):
            value = getattr(self, name)
            cut[name] = None if value is None else value[:n_episodes]
        cut["side"] = {name: value[:n_episodes, t] for name, value in self.side.items()}
        if self.module_actions is not None:  # warm-up steps first, then the recorded ones
            warmup = self.module_actions.shape[1] - self.episode_steps
            kept = self.module_actions.shape[1] if steps is None else warmup + steps
            cut["module_actions"] = self.module_actions[:n_episodes, :kept]
        return replace(self, **cut)

    def mean_reward_per_step(self) -> float:
        return float(self.rewards.mean())


def _map_state(fn: Callable[[Any], Any], state: Any) -> Any:
    if isinstance(state, Mapping):
        return {key: _map_state(fn, value) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_map_state(fn, value) for value in state)
    return fn(state)


def _zip_state(fn: Callable[[Any, Any], Any], first: Any, second: Any) -> Any:
    if isinstance(first, Mapping):
        return {key: _zip_state(fn, value, second[key]) for key, value in first.items()}
    if isinstance(first, list | tuple):
        return type(first)(_zip_state(fn, a, b) for a, b in zip(first, second, strict=True))
    return fn(first, second)


@contextmanager
def eval_mode(module: RLModule) -> Iterator[None]:
    """`module` in eval mode for the block (analysis reads, never trains), its training flag
    restored afterwards."""
    torch_module = _torch_module(module)
    was_training = torch_module.training
    torch_module.eval()
    try:
        yield
    finally:
        torch_module.train(was_training)


def _torch_module(module: RLModule) -> torch.nn.Module:
    """`module` as the torch module it is (analysis runs torch RLModules only)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"analysis runs torch RLModules, got {type(module).__name__}")
    return module


def _sample(dist: Any) -> torch.Tensor:
    """One draw of a torch action distribution (RLlib declares a tensor or a tuple)."""
    sample = dist.sample()
    if not isinstance(sample, torch.Tensor):
        raise TypeError(f"{type(dist).__name__}.sample() gave {type(sample).__name__}")
    return sample


def _module_device(module: RLModule) -> torch.device:
    parameter = next(iter(_torch_module(module).parameters()), None)
    return parameter.device if parameter is not None else torch.device("cpu")


class ModuleStepper:
    """Steps a module over `num_envs` parallel sequences, carrying its recurrent state.

    Stateless modules see obs (N, *obs_shape); stateful ones (`module.is_stateful()`) see
    (N, 1, *obs_shape) with STATE_IN batched from `get_initial_state()` and each step's
    STATE_OUT fed back, as RLlib's env runner does. Actions: "greedy" makes the inference
    distribution deterministic, "sample" draws from the exploration distribution (torch's
    RNG), "random" returns the module's greedy actions too (the caller replaces them).

    A module that reads the previous action (`PrevActionInputAPI`, e.g.
    StatefulTransformerActorCritic with the `prev_action` connectors) gets the `prev_actions`
    column the connectors write when RLlib acts: zeros at an episode's start (and after
    `reset_rows`), then the action noted with `note_actions` (one-hot for Discrete). Every
    step after the first needs the previous step's action noted: a read without it fails
    rather than feed the module zeros.

    The one way analysis steps a module: `collect_rollouts` (`step`), replay (`read`) and
    interventions (`read_tensors`) build their batches and carry the state here.
    """

    def __init__(
        self,
        module: RLModule,
        num_envs: int,
        *,
        representation: RepresentationExtractor = encode_representation,
        policy: Policy = "greedy",
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.module = module
        self.num_envs = num_envs
        self.representation = representation
        self.explore = policy == "sample"
        self.device = _module_device(module)
        self.stateful = bool(module.is_stateful())
        self.dist_class = (
            module.get_exploration_action_dist_cls()
            if self.explore
            else module.get_inference_action_dist_cls()
        )
        self.state = self.initial_state() if self.stateful else None
        self.prev_width = prev_action_width(module)
        self.prev_actions = torch.zeros(self.num_envs, self.prev_width, device=self.device)
        self._actions_noted = True  # nothing to note before the first step
        # Actions from the heads on the step's own representation, without a second pass
        # through the trunk: `encode_step` gives the representation and state
        # `forward_inference` computes, and `forward_heads` of it the module's own outputs
        # (module_api's contracts), the inputs of both action distributions (RLlib's
        # `_forward_exploration` and `_forward_inference` are its `_forward`).
        self.heads_read_features = (
            self.stateful
            and representation is encode_representation
            and isinstance(module, StepEncoderAPI)
            and isinstance(module, PolicyHeadsAPI)
        )

    def note_actions(self, actions: np.ndarray) -> None:
        """The actions taken after the last step (N, ...): the next step's `prev_actions`
        (a module that reads none ignores them). Discrete codes are one-hot encoded."""
        self._actions_noted = True
        if self.prev_width == 0:
            return
        self.prev_actions = self.action_columns(actions).reshape(self.num_envs, self.prev_width)

    def action_columns(self, actions: np.ndarray) -> torch.Tensor:
        """Actions (N, ...) or (N, T, ...) as the `prev_actions` floats the connectors write:
        (..., prev_width), Discrete codes one-hot encoded."""
        import gymnasium as gym

        values = torch.as_tensor(np.asarray(actions), device=self.device)
        if isinstance(self.module.action_space, gym.spaces.Discrete):
            start = int(self.module.action_space.start)
            values = torch.nn.functional.one_hot(values.long() - start, self.prev_width)
        return values.float()

    def initial_state(self) -> Any:
        def tile(value: Any) -> torch.Tensor:
            tensor = torch.as_tensor(np.asarray(value), device=self.device)
            return tensor.unsqueeze(0).repeat(self.num_envs, *([1] * tensor.dim()))

        return _map_state(tile, self.module.get_initial_state())

    def reset_rows(self, rows: np.ndarray) -> None:
        """Start new episodes in the copies where `rows` (N,) is True: their carried state
        goes back to `get_initial_state()` (stateless modules carry none)."""
        mask = torch.as_tensor(np.asarray(rows, dtype=bool), device=self.device)
        if self.prev_width:
            self.prev_actions = torch.where(mask[:, None], 0.0, self.prev_actions)
        if not self.stateful or not bool(mask.any()):
            return
        initial = self.initial_state()

        def where(fresh: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
            shaped = mask.reshape(-1, *([1] * (current.dim() - 1)))
            return torch.where(shaped, fresh, current)

        self.state = _zip_state(where, initial, self.state)

    def step(self, obs: np.ndarray) -> tuple[np.ndarray, Any]:
        """(actions (N, ...), representations) for one batch of observations:
        representations (N, d), or {name: (N, d)} when the extractor returns a mapping."""
        _, actions, features = self._advance(obs, act=True)
        return actions, self._arrays(features)

    def read(self, obs: np.ndarray) -> Any:
        """The representations of `step` without choosing actions (replay). When the
        extractor also returns the state after the step (as `encode_step` does), the
        module's forward pass is skipped: that state is the one acting would carry."""
        return self._arrays(self._advance(obs, act=False)[2])

    def read_tensors(self, obs: np.ndarray) -> tuple[dict[str, Any], Any]:
        """`read` without turning the representations into arrays: (the batch the module
        read, its STATE_IN the state before this step; what the extractor returned, as
        tensors on the module's device). The state is carried as `read` carries it. For an
        analysis that runs more of the module from this step (interventions)."""
        batch, _, features = self._advance(obs, act=False)
        return batch, features

    def _batch(self, obs: np.ndarray) -> dict[str, Any]:
        """The module's batch of one step: obs as tensors on its device (a time axis of 1
        for a stateful module) and, for a stateful module, STATE_IN the carried state."""
        # Contiguous, as an env returns them: a strided slice of a recorded array would take
        # other kernels and round differently.
        if isinstance(obs, Mapping):  # a Dict observation: one tensor per key
            tensors = {
                k: torch.as_tensor(np.ascontiguousarray(v), device=self.device)
                for k, v in obs.items()
            }
            rows = {int(t.shape[0]) for t in tensors.values()}
            if rows != {self.num_envs}:
                raise ValueError(f"expected {self.num_envs} observations per key, got {rows}")
            module_obs: Any = {k: t[:, None] if self.stateful else t for k, t in tensors.items()}
        else:
            tensor = torch.as_tensor(np.ascontiguousarray(obs), device=self.device)
            if tensor.shape[0] != self.num_envs:
                raise ValueError(f"expected {self.num_envs} observations, got {tensor.shape[0]}")
            module_obs = tensor[:, None] if self.stateful else tensor
        batch: dict[str, Any] = {OBS: module_obs}
        if self.prev_width:
            if not self._actions_noted:
                raise ValueError(
                    f"{type(self.module).__name__} reads the previous action (prev_actions): "
                    "pass the actions taken (replay: the rollouts' actions) so it reads what "
                    "it read when acting"
                )
            prev = self.prev_actions
            batch[PREV_ACTIONS] = prev[:, None] if self.stateful else prev
        if self.stateful:
            batch[STATE_IN] = self.state
        return batch

    def _advance(self, obs: np.ndarray, *, act: bool) -> tuple[dict[str, Any], Any, Any]:
        """(the step's batch, actions or None, the extractor's features) of one step; the
        state after it carried."""
        batch = self._batch(obs)
        actions = None
        with torch.inference_mode():
            read = self.representation(self.module, batch)
            features, state_out = read if isinstance(read, tuple) else (read, None)
            if act and self.heads_read_features and state_out is not None:
                inputs, _ = self.module.forward_heads(features)  # type: ignore[attr-defined]
                dist = self.dist_class.from_logits(inputs)
                if not self.explore:
                    dist = dist.to_deterministic()
                actions = _sample(dist).cpu().numpy()
            elif act or (self.stateful and state_out is None):
                out = (
                    self.module.forward_exploration(batch)
                    if self.explore
                    else self.module.forward_inference(batch)
                )
                if self.stateful:
                    if STATE_OUT not in out:
                        raise KeyError(
                            f"stateful {type(self.module).__name__} returned no {STATE_OUT!r}"
                        )
                    state_out = out[STATE_OUT]
                if act:
                    dist = self.dist_class.from_logits(out[ACTION_DIST_INPUTS])
                    if not self.explore:
                        dist = dist.to_deterministic()
                    sampled = _sample(dist)
                    actions = (sampled[:, 0] if self.stateful else sampled).cpu().numpy()
        if self.stateful:
            self.state = state_out
        self._actions_noted = False
        return batch, actions, features

    def _arrays(self, features: Any) -> Any:
        if isinstance(features, Mapping):
            return {name: self._features(value) for name, value in features.items()}
        return self._features(features)

    def _features(self, features: torch.Tensor) -> np.ndarray:
        if self.stateful and features.dim() >= 3:
            features = features[:, 0]
        if features.dim() != 2 or features.shape[0] != self.num_envs:
            raise ValueError(
                f"the representation extractor must give (N, d) (or (N, 1, d) for a stateful "
                f"module), got {tuple(features.shape)}"
            )
        return features.float().cpu().numpy()


def _collect_batch(
    module: RLModule,
    env: VectorEnv[Any, Any, Any],
    seeds: list[int],
    episode_steps: int,
    warmup_steps: int,
    target: TargetExtractor,
    representation: RepresentationExtractor,
    policy: Policy,
    preprocess: Callable[[np.ndarray], np.ndarray] | None,
    action_transform: ActionTransform | None,
    action_rng: np.random.Generator,
    actor: Actor | None,
    side: Mapping[str, TargetExtractor],
    replay_steps: int | None,
) -> tuple[Any, ...]:
    n = len(seeds)
    stepper = ModuleStepper(module, n, representation=representation, policy=policy)
    # An actor or random play chooses the actions: the module only reads, every step (no
    # action pass), or with `replay_steps` afterwards, replaying what was played.
    reads_only = actor is not None or policy == "random"
    read_later = reads_only and replay_steps is not None
    played: list[np.ndarray] = []
    played_actions: list[np.ndarray] = []
    # gymnasium's VectorEnv.reset declares one int; its vector envs take a seed per copy.
    obs, info = env.reset(seed=seeds)  # type: ignore[arg-type]
    observations: list[np.ndarray] = []
    features: list[Any] = []  # (N, d) arrays, or None until `read_later` replays them
    targets: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    warmup: list[np.ndarray] = []
    warmup_actions: list[np.ndarray] = []
    # The module's own actions where a transform maps them for the env (Rollouts.module_actions).
    transformed = actor is None and policy != "random" and action_transform is not None
    module_actions: list[np.ndarray] = []
    side_values: dict[str, list[np.ndarray]] = {name: [] for name in side}
    total = warmup_steps + episode_steps
    for t in range(total):
        module_obs = preprocess(obs) if preprocess else obs
        feature: Any = None
        if read_later:
            played.append(np.asarray(obs))
        elif reads_only:
            feature = stepper.read(module_obs)
        else:
            chosen, feature = stepper.step(module_obs)
        if feature is not None and not isinstance(feature, np.ndarray):
            raise TypeError(
                "collect_rollouts records one representation per step: the extractor returned "
                "a mapping (replay the rollouts with replay_named_representations instead)"
            )
        if t < warmup_steps:
            warmup.append(np.asarray(obs))
        if actor is not None:
            action = np.asarray(actor(obs, info))
        elif policy == "random":
            action = random_actions(env.single_action_space, n, action_rng)
        else:
            action = chosen  # the module chose (stepper.step): neither an actor nor random
        # The previous action a module reads is the one RLlib's episode stores: the module's
        # own sample (before `action_transform`), or what an actor or random play executed.
        stepper.note_actions(action)
        if read_later:
            played_actions.append(np.asarray(action))
        if transformed:
            module_actions.append(np.asarray(action))
            assert action_transform is not None  # `transformed` says so
            action = np.asarray(action_transform(action))
        if t < warmup_steps:
            warmup_actions.append(np.asarray(action))
        if t >= warmup_steps:
            observations.append(np.asarray(obs))
            features.append(feature)
            targets.append(target(info))
            for name, extract in side.items():
                side_values[name].append(extract(info))
            actions.append(np.asarray(action))
        obs, reward, terminated, truncated, info = env.step(action)
        if t >= warmup_steps:
            rewards.append(np.asarray(reward, dtype=np.float64))
        ended = np.logical_or(terminated, truncated)
        if t + 1 < total and np.any(ended):
            raise ValueError(
                f"an episode ended after {t + 1} steps, before warmup_steps + episode_steps = "
                f"{total}; collect at most as many steps as the shortest episode"
            )
    if read_later:
        from rl_harness.analysis.replay import replay_observations

        replayed = replay_observations(
            module,
            np.stack(played, axis=1),
            representation=representation,
            preprocess=preprocess,
            steps_per_call=int(replay_steps or 1),
            actions=np.stack(played_actions, axis=1),
        )
        features = list(replayed[:, warmup_steps:].swapaxes(0, 1))
    parts = (observations, features, targets, actions, rewards)
    first = np.asarray(observations[0])
    history = (
        np.stack(warmup, axis=1)
        if warmup
        else np.zeros((n, 0, *first.shape[1:]), dtype=first.dtype)
    )
    first_action = np.asarray(actions[0])
    history_actions = (
        np.stack(warmup_actions, axis=1)
        if warmup_actions
        else np.zeros((n, 0, *first_action.shape[1:]), dtype=first_action.dtype)
    )
    recorded_side = {name: np.stack(values, axis=1) for name, values in side_values.items()}
    return (
        *(np.stack(part, axis=1) for part in parts),
        history,
        history_actions,
        np.stack(module_actions, axis=1) if module_actions else None,
        recorded_side,
    )


def collect_rollouts(
    module: RLModule,
    make_env: Callable[[int], VectorEnv[Any, Any, Any]],
    *,
    n_episodes: int,
    episode_steps: int,
    seed: int,
    target: TargetExtractor,
    representation: RepresentationExtractor = encode_representation,
    num_envs: int = 64,
    policy: Policy = "greedy",
    warmup_steps: int = 0,
    preprocess: Callable[[np.ndarray], np.ndarray] | None = None,
    action_transform: ActionTransform | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
    actor: Actor | None = None,
    side: Mapping[str, TargetExtractor] | None = None,
    replay_steps: int | None = None,
) -> Rollouts:
    """Play `n_episodes` episodes, `num_envs` at a time; record `episode_steps` steps of each
    after `warmup_steps` steps that are played (state carried) but not recorded.

    `make_env(num_envs)` builds a gymnasium VectorEnv; episode i is reset with
    `stream_seed(seed, *stream, "episode", str(i))`, so adding episodes never changes
    earlier ones. `policy="sample"` draws from torch's RNG seeded by the stream
    `(*stream, "actions")` (restored afterwards); `policy="random"` draws from the NumPy
    stream `(*stream, "random_actions")`. With `actor`, the env executes `actor(obs, info)`
    (env units, no `action_transform`) and the module only reads: its representations are
    those of an agent watching the actor play (policy must stay "greedy").
    `side` {name: extractor of the info, as `target`}: arrays recorded at the same steps as
    the targets but not probed (`Rollouts.side[name]`, (n_episodes, T, k)), e.g.
    `{"state": info_target("state")}` for read-outs by hidden state.

    `replay_steps`: when the module only reads (an actor, or `policy="random"`), play the
    episodes without stepping it and read its representations afterwards, replaying what was
    played (observations and actions, so a module reading the previous action reads what it
    would have read stepping) `replay_steps` steps per call (`replay_observations(...,
    steps_per_call=)`: equal to reading each step up to float rounding, and much faster for a
    module with `encode_sequence_residuals`). Ignored when the module chooses the actions.
    """
    for name, value in (("n_episodes", n_episodes), ("episode_steps", episode_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if replay_steps is not None and (
        isinstance(replay_steps, bool) or not isinstance(replay_steps, int) or replay_steps < 1
    ):
        raise ValueError(f"replay_steps must be a positive int or None, got {replay_steps!r}")
    if actor is not None and policy != "greedy":
        raise ValueError(f"an actor chooses the actions: leave policy 'greedy', got {policy!r}")
    stream = tuple(stream)
    seeds = [stream_seed(seed, *stream, "episode", str(i)) for i in range(n_episodes)]
    action_rng = stream_rng(seed, *stream, "random_actions")
    parts: list[tuple[Any, ...]] = []
    with eval_mode(module), torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(seed, *stream, "actions"))
        for start in range(0, n_episodes, num_envs):
            chunk = seeds[start : start + num_envs]
            env = make_env(len(chunk))
            try:
                parts.append(
                    _collect_batch(
                        module,
                        env,
                        chunk,
                        episode_steps,
                        warmup_steps,
                        target,
                        representation,
                        policy,
                        preprocess,
                        action_transform,
                        action_rng,
                        actor,
                        dict(side or {}),
                        replay_steps,
                    )
                )
            finally:
                env.close()
    side_parts = [part[-1] for part in parts]
    observations, features, targets, actions, rewards, warmup, warmup_actions = (
        np.concatenate(p) for p in zip(*(part[:-2] for part in parts), strict=True)
    )
    chosen = [part[-2] for part in parts]  # every batch alike: the same policy and transform
    module_actions = None if chosen[0] is None else np.concatenate(chosen)
    recorded_side = {name: np.concatenate([p[name] for p in side_parts]) for name in side or {}}
    return Rollouts(
        observations=observations,
        representations=features,
        targets=targets,
        actions=actions,
        rewards=rewards,
        episode_ids=np.arange(n_episodes),
        episode_seeds=np.asarray(seeds, dtype=np.int64),
        warmup_observations=warmup,
        num_envs=num_envs,
        warmup_actions=warmup_actions,
        side=recorded_side,
        module_actions=module_actions,
    )
