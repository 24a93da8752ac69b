"""`HMMEnvConfig`: the validated, JSON-serializable env_config of `HMMEnv` / `HMMVectorEnv`.

The model and the task are named by "package.module:attr" strings (no registry) and built in
the process that makes the env, so the config crosses process boundaries as plain data.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.model import HMMModel
from rl_harness.envs.hmm.task import ContinuousTask, Task

INFO_KEYS = (
    "token",
    "state_before",
    "state",
    "belief",
    "decision_belief",
    "action",
    "transition_matrix",
    "reward_components",
)


@dataclass(frozen=True)
class HMMEnvConfig:
    """Fields of env_config. `model` is a "module:factory" string called with `model_kwargs`,
    or an explicit {"token_matrices": [[[...]]], "initial": [...] (optional)} mapping."""

    model: str | dict[str, Any]
    task: str
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    episode_length: int = 128
    random_first_episode_length: bool = False
    token_window: int = 8
    action_window: int = 0
    include_belief: bool = False
    include_state: bool = False
    include_decision_belief: bool = False
    observation_delay: int = 0
    info: tuple[str, ...] = ()
    # True: a Dict observation of named parts ("tokens" (W, n_tokens), "actions" (W_a, size),
    # "belief", "state", "decision_belief"), so a model reads its inputs by name.
    dict_observation: bool = False

    @classmethod
    def from_mapping(cls, env_config: Mapping[str, Any]) -> HMMEnvConfig:
        if not isinstance(env_config, Mapping):
            raise TypeError(f"env_config must be a mapping, got {type(env_config).__name__}")
        values = dict(env_config)
        allowed = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise ValueError(f"unknown env_config keys {unknown}; allowed: {sorted(allowed)}")
        missing = sorted({"model", "task"} - set(values))
        if missing:
            raise ValueError(f"env_config is missing {missing}")
        try:
            json.dumps(values, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"env_config must be JSON-serializable: {error}") from error
        if "info" in values:
            info = values["info"]
            if not isinstance(info, list | tuple) or not all(isinstance(k, str) for k in info):
                raise ValueError(f"env_config 'info' must be a list of key names, got {info!r}")
            values["info"] = tuple(info)
        config = cls(**values)
        config._validate()
        return config

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["info"] = list(self.info)
        return values

    def _validate(self) -> None:
        if not isinstance(self.model, str | dict):
            raise TypeError("env_config 'model' must be a 'module:factory' string or a mapping")
        if not isinstance(self.task, str):
            raise TypeError("env_config 'task' must be a 'module:Class' string")
        for name in ("model_kwargs", "task_kwargs"):
            if not isinstance(getattr(self, name), dict):
                raise TypeError(f"env_config {name!r} must be a mapping")
        for name, minimum in (
            ("episode_length", 1),
            ("token_window", 0),
            ("action_window", 0),
            ("observation_delay", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"env_config {name!r} must be an int >= {minimum}, got {value!r}")
        flags = ("random_first_episode_length", "include_belief", "include_state")
        for name in (*flags, "include_decision_belief", "dict_observation"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"env_config {name!r} must be a bool")
        bad = sorted(set(self.info) - set(INFO_KEYS))
        if bad:
            raise ValueError(f"unknown info keys {bad}; allowed: {list(INFO_KEYS)}")
        if not (self.token_window or self.action_window or self.include_belief):
            if not (self.include_state or self.include_decision_belief):
                raise ValueError(
                    "the observation would be empty: set token_window, action_window, "
                    "include_belief, include_state or include_decision_belief"
                )


def load_object(spec: str) -> Any:
    """The attribute named by "package.module:attr"."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'package.module:attr', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import module {module_name!r} (from {spec!r})") from error
    try:
        return getattr(module, attr)
    except AttributeError as error:
        raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from error


def build_model(config: HMMEnvConfig) -> HMMModel:
    if isinstance(config.model, dict):
        explicit = dict(config.model)
        unknown = sorted(set(explicit) - {"token_matrices", "initial", "name"})
        if unknown or "token_matrices" not in explicit:
            raise ValueError(
                "an explicit model mapping needs 'token_matrices' and may hold 'initial', "
                f"'name'; got keys {sorted(explicit)}"
            )
        if config.model_kwargs:
            raise ValueError("model_kwargs apply to a model factory, not an explicit model")
        return HMMModel.from_token_matrices(
            np.asarray(explicit["token_matrices"], dtype=np.float64),
            explicit.get("initial"),
            name=explicit.get("name", "hmm"),
        )
    try:
        model = load_object(config.model)(**config.model_kwargs)
    except TypeError as error:
        raise TypeError(f"model {config.model!r} with {config.model_kwargs}: {error}") from error
    if not isinstance(model, HMMModel):
        raise TypeError(f"{config.model!r} returned {type(model).__name__}, not an HMMModel")
    return model


def build_task(config: HMMEnvConfig, model: HMMModel) -> Task | ContinuousTask:
    try:
        task = load_object(config.task)(model, **config.task_kwargs)
    except TypeError as error:
        raise TypeError(f"task {config.task!r} with {config.task_kwargs}: {error}") from error
    space = getattr(task, "action_space", None)
    if isinstance(space, gym.spaces.Box):
        if not callable(getattr(task, "control", None)):
            raise TypeError(
                f"task {config.task!r} has a Box action space but no control(actions) method "
                "(continuous tasks set the transition); otherwise use a Discrete action space "
                "starting at 0"
            )
        bounded = np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
        if len(space.shape) != 1 or not bounded or space.dtype is None or space.dtype.kind != "f":
            raise TypeError(
                f"task {config.task!r} must have a 1-d float Box action space with finite "
                f"bounds, got {space}"
            )
        if not isinstance(task, ContinuousTask):
            raise TypeError(
                f"task {config.task!r} lacks part of the ContinuousTask interface "
                "(action_space, reward_components, control, reward)"
            )
        return task
    if not isinstance(space, gym.spaces.Discrete) or int(space.start) != 0:
        raise TypeError(
            f"task {config.task!r} must have a Discrete action space starting at 0 "
            "(or a Box action space with a control(actions) method)"
        )
    if not isinstance(task, Task):
        raise TypeError(
            f"task {config.task!r} lacks part of the Task interface "
            "(action_space, reward_components, control_matrices, reward)"
        )
    return task


def resolve_config(
    env_config: Mapping[str, Any] | HMMEnvConfig | None, kwargs: dict[str, Any]
) -> HMMEnvConfig:
    """Accept `Env(env_config)` (RLlib style) or `Env(**env_config)` (gymnasium.make style)."""
    if isinstance(env_config, HMMEnvConfig):
        if kwargs:
            raise TypeError("pass either an HMMEnvConfig or keyword settings, not both")
        return env_config
    if env_config is not None and kwargs:
        raise TypeError("pass env_config either as one mapping or as keywords, not both")
    return HMMEnvConfig.from_mapping(kwargs if env_config is None else env_config)
