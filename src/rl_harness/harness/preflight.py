"""Checks a runner makes in the driver before it starts Ray: bad input fails in seconds, in
one line naming the key or path, instead of after Ray's start inside a worker's traceback.

- `check_buildable(config)`: builds what one local env runner builds (the env from `env` and
  `env_config`, the RLModule from its spec and `model_config`), then closes it. A typo in a
  model_config key, a bad env_config value (a negative MESS3 alpha) or an algorithm setting
  RLlib refuses raise `PreflightError` with the innermost message.
- `check_checkpoint(path, config)`: a direct runner's `--resume-from` checkpoint is readable
  (its RLlib metadata, the pickled ctor args of the algorithm and each RLModule, and every
  state file, weights included: `algorithm_state.pkl`, each `module_state.pkl`, ... load)
  and fits `config` (same algorithm class, RLModule class, spaces and model_config).

Both know no named environment or model: they ask RLlib's own classes, and a built RLModule
that has a `check_algorithm_config(config)` method is asked whether it can train under the
config (the stateful transformer refuses a config without `store_kv_steps`).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl_harness.harness.layout import RLLIB_CHECKPOINT_FILE, resolve_checkpoint

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

CTOR_FILE = "class_and_ctor_args.pkl"  # RLlib's Checkpointable: the class and its ctor args
MODULE_DIRS = ("learner_group/learner/rl_module", "env_runner/rl_module")


class PreflightError(ValueError):
    """Input the driver can see is bad before Ray starts: one line naming the key or path."""


def one_line(error: BaseException) -> str:
    """The innermost cause's message on one line (RLlib wraps the recipe's own errors)."""
    while error.__cause__ is not None or error.__context__ is not None:
        inner = error.__cause__ or error.__context__
        assert inner is not None
        if isinstance(inner, KeyboardInterrupt):
            break
        error = inner
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}" if not isinstance(error, ValueError) else text


def _env_runner_class(config: AlgorithmConfig) -> type:
    if config.env_runner_cls is not None:
        return config.env_runner_cls
    if config.is_multi_agent:
        from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

        return MultiAgentEnvRunner
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    return SingleAgentEnvRunner


def check_buildable(config: AlgorithmConfig) -> dict[str, dict[str, Any]]:
    """Build the config's env and RLModule once in this process (no Ray): PreflightError
    naming what is wrong. Returns what was built, per module id: class, spaces and
    model_config (what a checkpoint must match); the env runner is stopped again. A module
    with a `check_algorithm_config(config)` method is asked it (a ValueError refuses)."""
    if not config.enable_env_runner_and_connector_v2 or not config.env:
        return {}  # the old API stack, or an env the recipe builds elsewhere: RLlib checks it
    trial = config.copy(copy_frozen=False)
    try:
        trial.validate()
    except Exception as error:
        raise PreflightError(f"the algorithm config is invalid: {one_line(error)}") from None
    try:
        runner = _env_runner_class(trial)(config=trial)
    except Exception as error:
        raise PreflightError(
            f"the env or RLModule cannot be built from the config: {one_line(error)}"
        ) from None
    try:
        from ray.rllib.core import DEFAULT_MODULE_ID

        module = getattr(runner, "module", None)
        if module is None:
            modules = {}
        elif hasattr(module, "items"):  # a MultiRLModule (multi-agent env runners)
            modules = dict(module.items())
        else:  # a single-agent env runner holds the one RLModule itself
            modules = {DEFAULT_MODULE_ID: module}
        for sub in modules.values():
            check = getattr(sub, "check_algorithm_config", None)
            if callable(check):
                try:
                    check(trial)
                except ValueError as error:
                    raise PreflightError(
                        f"the RLModule cannot train under this config: {one_line(error)}"
                    ) from None
        return {
            module_id: {
                "class": type(sub),
                "observation_space": getattr(sub, "observation_space", None),
                "action_space": getattr(sub, "action_space", None),
                "model_config": dict(getattr(sub, "model_config", None) or {}),
            }
            for module_id, sub in modules.items()
        }
    finally:
        try:
            runner.stop()
        except Exception:  # noqa: S110 - closing a trial env must not fail a valid config
            pass


def _load_pickle(path: Path, checkpoint: Path) -> Any:
    try:
        with path.open("rb") as file:
            return pickle.load(file)
    except FileNotFoundError:
        raise PreflightError(
            f"checkpoint {checkpoint} is corrupt: {path.relative_to(checkpoint)} is missing"
        ) from None
    except Exception as error:
        raise PreflightError(
            f"checkpoint {checkpoint} is corrupt: {path.relative_to(checkpoint)} "
            f"cannot be read ({type(error).__name__}: {' '.join(str(error).split())})"
        ) from None


def _load_state_files(checkpoint: Path) -> None:
    """Load every state file of the checkpoint (RLlib's Checkpointable writes one per
    component: `<name>_state.pkl`, or `.msgpack`): a truncated or garbage file fails here,
    naming it, instead of ~40 s later in Ray's restore. Weights are small next to a run."""
    for path in sorted(checkpoint.rglob("*.pkl")):
        if path.name != CTOR_FILE:  # those are read with their checks
            _load_pickle(path, checkpoint)
    packed = sorted(checkpoint.rglob("*.msgpack"))
    if packed:
        from ray.rllib.utils.checkpoints import try_import_msgpack

        msgpack = try_import_msgpack(error=True)
        for path in packed:
            try:
                with path.open("rb") as file:
                    msgpack.load(file, strict_map_key=False)
            except Exception as error:
                raise PreflightError(
                    f"checkpoint {checkpoint} is corrupt: {path.relative_to(checkpoint)} "
                    f"cannot be read ({type(error).__name__})"
                ) from None


def _ctor_kwargs(state: Any) -> dict[str, Any]:
    args = state.get("ctor_args_and_kwargs") if isinstance(state, Mapping) else None
    if isinstance(args, tuple | list) and len(args) == 2 and isinstance(args[1], Mapping):
        return dict(args[1])
    return {}


def _modules(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """Each RLModule's ctor kwargs in the checkpoint, by module id (learner's copy first)."""
    for relative in MODULE_DIRS:
        folder = checkpoint / relative
        if folder.is_dir():
            found = {}
            for module_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
                state = _load_pickle(module_dir / CTOR_FILE, checkpoint)
                found[module_dir.name] = {"class": state.get("class"), **_ctor_kwargs(state)}
            return found
    return {}


def _name(value: Any) -> str:
    return getattr(value, "__qualname__", None) or repr(value)


def _module_mismatch(saved: Mapping[str, Any], built: Mapping[str, Any]) -> str | None:
    """The first way the checkpoint's modules differ from those the config builds, or None.
    model_config: keys both sides hold (RLlib fills defaults in on one side only)."""
    for module_id, here in built.items():
        if module_id not in saved:
            return f"it has no RLModule {module_id!r} (it has {sorted(saved)})"
        there = saved[module_id]
        if there.get("class") is not None and _name(here["class"]) != _name(there["class"]):
            return (
                f"RLModule {module_id!r} is a {_name(there['class'])} there, "
                f"a {_name(here['class'])} here"
            )
        there_model = dict(there.get("model_config") or {})
        for key in sorted(set(here["model_config"]) & set(there_model)):
            if here["model_config"][key] != there_model[key]:
                return (
                    f"RLModule {module_id!r} model_config[{key!r}] is "
                    f"{there_model[key]!r} there, {here['model_config'][key]!r} here"
                )
        for name in ("observation_space", "action_space"):
            here_space, there_space = here[name], there.get(name)
            if here_space is not None and there_space is not None and here_space != there_space:
                return f"RLModule {module_id!r} {name} is {there_space} there, {here_space} here"
    return None


def check_checkpoint(
    path: Path,
    config: AlgorithmConfig | None = None,
    built: Mapping[str, Any] | None = None,
) -> Path:
    """The checkpoint `path` resolves to, checked readable (PreflightError saying "corrupt"
    and naming the path) and, given `config` and the modules it builds (`check_buildable`),
    made by the same algorithm and RLModules (PreflightError naming the first mismatch)."""
    try:
        checkpoint = resolve_checkpoint(Path(path))
    except FileNotFoundError as error:
        raise PreflightError(str(error)) from None
    marker = checkpoint / RLLIB_CHECKPOINT_FILE
    try:
        json.loads(marker.read_text())
    except (OSError, ValueError) as error:
        raise PreflightError(
            f"checkpoint {checkpoint} is corrupt: {RLLIB_CHECKPOINT_FILE} cannot be read "
            f"({type(error).__name__})"
        ) from None
    algorithm = _load_pickle(checkpoint / CTOR_FILE, checkpoint)
    saved = _modules(checkpoint)
    _load_state_files(checkpoint)
    if config is None:
        return checkpoint
    algo_class = algorithm.get("class") if isinstance(algorithm, Mapping) else None
    here_class = config.algo_class
    if algo_class is not None and here_class is not None and algo_class != here_class:
        raise PreflightError(
            f"checkpoint {checkpoint} does not fit this config: it is a {_name(algo_class)} "
            f"checkpoint, the config builds a {_name(here_class)}"
        )
    mismatch = _module_mismatch(saved, built or {})
    if mismatch is not None:
        raise PreflightError(f"checkpoint {checkpoint} does not fit this config: {mismatch}")
    return checkpoint
