"""Roll a trained RLModule through a batch of envs and record what a probe needs.

Everything domain-specific is injected: the env comes from a factory of gymnasium
`VectorEnv`s, the representation from an extractor called on the module (by default its
public `encode(batch)`), and the targets from an extractor of the env's `info` (e.g.
`info_target("belief")`). Analysis never reads private env or module attributes.

Timing: record t pairs the module's representation after it has read observation t with
the info returned alongside observation t (reset info for t = 0), and the reward of the
action it then takes. Each copy plays one episode of exactly `episode_steps` actions.

Observations are fed to the module as the env returns them (plus RLlib's time axis for
stateful modules): recipes whose env-to-module connectors transform observations must
pass the same transform as `preprocess`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rl_harness.seeding import stream_seed

if TYPE_CHECKING:
    from gymnasium.vector import VectorEnv
    from ray.rllib.core.rl_module.rl_module import RLModule

RepresentationExtractor = Callable[["RLModule", dict[str, Any]], torch.Tensor]
TargetExtractor = Callable[[Mapping[str, Any]], np.ndarray]
DEFAULT_STREAM = ("analysis", "rollouts")

# RLlib's batch column names (ray.rllib.core.columns.Columns), spelled out so importing this
# module does not import RLlib.
OBS, STATE_IN, STATE_OUT = "obs", "state_in", "state_out"
ACTION_DIST_INPUTS = "action_dist_inputs"


def encode_representation(module: RLModule, batch: dict[str, Any]) -> torch.Tensor:
    """The module's public representation, `module.encode(batch)`."""
    encode = getattr(module, "encode", None)
    if not callable(encode):
        raise TypeError(
            f"{type(module).__name__} has no public encode(batch); pass a representation "
            "extractor that reads the module's representation through its public API"
        )
    return encode(batch)


def info_target(key: str) -> TargetExtractor:
    """Targets from a vector env's info: `info[key]` as a float64 (num_envs, k) array."""

    def extract(info: Mapping[str, Any]) -> np.ndarray:
        if key not in info:
            raise KeyError(
                f"env info has no {key!r} (it has {sorted(k for k in info if k[0] != '_')}); "
                "configure the env to report it"
            )
        mask = info.get(f"_{key}")
        if mask is not None and not np.all(mask):
            raise ValueError(f"env info {key!r} is missing for some copies")
        values = np.asarray(info[key], dtype=np.float64)
        return values.reshape(values.shape[0], -1)

    return extract


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

    @property
    def n_episodes(self) -> int:
        return int(self.representations.shape[0])

    @property
    def episode_steps(self) -> int:
        return int(self.representations.shape[1])

    def mean_reward_per_step(self) -> float:
        return float(self.rewards.mean())


def _map_state(fn: Callable[[Any], Any], state: Any) -> Any:
    if isinstance(state, Mapping):
        return {key: _map_state(fn, value) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_map_state(fn, value) for value in state)
    return fn(state)


def _module_device(module: RLModule) -> torch.device:
    parameter = next(iter(module.parameters()), None)
    return parameter.device if parameter is not None else torch.device("cpu")


class ModuleStepper:
    """Steps a module over `num_envs` parallel sequences, carrying its recurrent state.

    Stateless modules see obs (N, *obs_shape); stateful ones (`module.is_stateful()`) see
    (N, 1, *obs_shape) with STATE_IN batched from `get_initial_state()` and each step's
    STATE_OUT fed back, as RLlib's env runner does. Actions come from the module's
    inference action distribution (greedy via `to_deterministic()` unless `explore`).
    """

    def __init__(
        self,
        module: RLModule,
        num_envs: int,
        *,
        representation: RepresentationExtractor = encode_representation,
        explore: bool = False,
    ) -> None:
        self.module = module
        self.num_envs = num_envs
        self.representation = representation
        self.explore = explore
        self.device = _module_device(module)
        self.stateful = bool(module.is_stateful())
        self.dist_class = (
            module.get_exploration_action_dist_cls()
            if explore
            else module.get_inference_action_dist_cls()
        )
        self.state = self.initial_state() if self.stateful else None

    def initial_state(self) -> Any:
        def tile(value: Any) -> torch.Tensor:
            tensor = torch.as_tensor(np.asarray(value), device=self.device)
            return tensor.unsqueeze(0).repeat(self.num_envs, *([1] * tensor.dim()))

        return _map_state(tile, self.module.get_initial_state())

    def step(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(actions (N, ...), representations (N, d)) for one batch of observations."""
        tensor = torch.as_tensor(np.asarray(obs), device=self.device)
        if tensor.shape[0] != self.num_envs:
            raise ValueError(f"expected {self.num_envs} observations, got {tensor.shape[0]}")
        batch: dict[str, Any] = {OBS: tensor[:, None] if self.stateful else tensor}
        if self.stateful:
            batch[STATE_IN] = self.state
        with torch.inference_mode():
            features = self.representation(self.module, batch)
            out = (
                self.module.forward_exploration(batch)
                if self.explore
                else self.module.forward_inference(batch)
            )
            dist = self.dist_class.from_logits(out[ACTION_DIST_INPUTS])
            if not self.explore:
                dist = dist.to_deterministic()
            actions = dist.sample()
        if self.stateful:
            if STATE_OUT not in out:
                raise KeyError(f"stateful {type(self.module).__name__} returned no {STATE_OUT!r}")
            self.state = out[STATE_OUT]
            features = features[:, 0] if features.dim() >= 3 else features
            actions = actions[:, 0]
        if features.dim() != 2 or features.shape[0] != self.num_envs:
            raise ValueError(
                f"the representation extractor must give (N, d) (or (N, 1, d) for a stateful "
                f"module), got {tuple(features.shape)}"
            )
        return actions.cpu().numpy(), features.float().cpu().numpy()


def _collect_batch(
    module: RLModule,
    env: VectorEnv,
    seeds: list[int],
    episode_steps: int,
    target: TargetExtractor,
    representation: RepresentationExtractor,
    explore: bool,
    preprocess: Callable[[np.ndarray], np.ndarray] | None,
) -> tuple[np.ndarray, ...]:
    n = len(seeds)
    stepper = ModuleStepper(module, n, representation=representation, explore=explore)
    obs, info = env.reset(seed=seeds)
    observations, features, targets, actions, rewards = [], [], [], [], []
    for t in range(episode_steps):
        action, feature = stepper.step(preprocess(obs) if preprocess else obs)
        observations.append(np.asarray(obs))
        features.append(feature)
        targets.append(target(info))
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(np.asarray(reward, dtype=np.float64))
        ended = np.logical_or(terminated, truncated)
        if t + 1 < episode_steps and np.any(ended):
            raise ValueError(
                f"an episode ended after {t + 1} steps, before episode_steps={episode_steps}; "
                "collect at most as many steps as the shortest episode"
            )
    parts = (observations, features, targets, actions, rewards)
    return tuple(np.stack(part, axis=1) for part in parts)


def collect_rollouts(
    module: RLModule,
    make_env: Callable[[int], VectorEnv],
    *,
    n_episodes: int,
    episode_steps: int,
    seed: int,
    target: TargetExtractor,
    representation: RepresentationExtractor = encode_representation,
    num_envs: int = 64,
    explore: bool = False,
    preprocess: Callable[[np.ndarray], np.ndarray] | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
) -> Rollouts:
    """Play `n_episodes` episodes, `num_envs` at a time, and record `episode_steps` each.

    `make_env(num_envs)` builds a gymnasium VectorEnv; episode i is reset with
    `stream_seed(seed, *stream, "episode", str(i))`, so adding episodes never changes
    earlier ones. With `explore`, action sampling draws from torch's RNG seeded by the
    stream `(*stream, "actions")` (restored afterwards).
    """
    for name, value in (("n_episodes", n_episodes), ("episode_steps", episode_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
    stream = tuple(stream)
    seeds = [stream_seed(seed, *stream, "episode", str(i)) for i in range(n_episodes)]
    was_training = module.training
    module.eval()
    parts: list[tuple[np.ndarray, ...]] = []
    try:
        with torch.random.fork_rng(devices=[]):
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
                            target,
                            representation,
                            explore,
                            preprocess,
                        )
                    )
                finally:
                    env.close()
    finally:
        module.train(was_training)
    observations, features, targets, actions, rewards = (
        np.concatenate(p) for p in zip(*parts, strict=True)
    )
    return Rollouts(
        observations=observations,
        representations=features,
        targets=targets,
        actions=actions,
        rewards=rewards,
        episode_ids=np.arange(n_episodes),
        episode_seeds=np.asarray(seeds, dtype=np.int64),
    )
