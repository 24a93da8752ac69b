"""What was trained: the resolved `AlgorithmConfig` as plain, redacted, key-sorted JSON.

results/<run-id>/config.json holds

    {"algorithm_class": "ray.rllib.algorithms.ppo.ppo.PPO",
     "module": {"class": "<module.qualname>", "model_config": {...},
                "init": {...}},  # only for a module class with `resolved_init`
     ...every key of AlgorithmConfig.to_dict(): env, env_config, lr, gamma, batch sizes,
        env-runner and learner settings, seed, ...; and for a private key with a public
        property (`_train_batch_size_per_learner`), the property's resolved value too}

Made JSON-safe without losing what a value is: classes and callables become their qualified
names ("module.qualname"), dataclasses such as `RLModuleSpec` their fields (the module class
and model_config included), NumPy values numbers, anything else its repr without memory
addresses; non-finite floats become the strings "inf", "-inf" and "nan". Secrets are redacted
as in every record (harness/redaction.py), and string values under secret-named keys too
(every string inside a list or mapping under one: `api_keys: [...]`).
`module.init` is the initialisation the module will get with its defaults filled in, asked of
the module class (`resolved_init(model_config)`, the library's ActorCriticRLModule has it), so
a recipe that relies on defaults still records them; a class without the method records none.
`flat_config` gives the dotted keys that `rl-harness diff`, `--log-to` and `compare` use.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from rl_harness.harness.redaction import REDACTED, redact_record

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# Words of a mapping key that mark its string value as a secret (api_key, auth_token, ...).
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "credential"}
_MAX_DEPTH = 12


def qualified_name(obj: Any) -> str:
    """`module.qualname` of a class or callable (a partial names its function)."""
    if isinstance(obj, functools.partial):
        return f"functools.partial({qualified_name(obj.func)})"
    module = getattr(obj, "__module__", None) or type(obj).__module__
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name is None:
        return _ADDRESS.sub("", repr(obj))
    return f"{module}.{name}"


def _is_secret_key(key: str) -> bool:
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).lower())
    return any(word.rstrip("s") in _SECRET_WORDS for word in words)


def _redact_strings(value: Any) -> Any:
    """A JSON value with every non-empty string in it redacted (the contents of a
    secret-named key)."""
    if isinstance(value, str):
        return REDACTED if value else value
    if isinstance(value, dict):
        return {key: _redact_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_strings(item) for item in value]
    return value


def config_value(obj: Any, depth: int = 0) -> Any:
    """A plain JSON value describing `obj` (see the module docstring)."""
    if depth > _MAX_DEPTH:
        return _ADDRESS.sub("", repr(obj))
    if obj is None or isinstance(obj, bool | str):
        return obj if not isinstance(obj, str) else str(obj)
    if isinstance(obj, int) and not isinstance(obj, enum.Enum):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else str(float(obj))
    if type(obj).__module__ == "numpy":
        item = getattr(obj, "tolist", None)
        if item is not None:
            return config_value(item(), depth + 1)
    if isinstance(obj, Mapping):
        result = {}
        for key, value in obj.items():
            name = key if isinstance(key, str) else str(config_value(key, depth + 1))
            if _is_secret_key(name) and isinstance(value, str) and value:
                result[name] = REDACTED
            elif _is_secret_key(name) and isinstance(
                value, Mapping | list | tuple | set | frozenset
            ):
                result[name] = _redact_strings(config_value(value, depth + 1))  # api_keys: [...]
            else:
                result[name] = config_value(value, depth + 1)
        return result
    if isinstance(obj, list | tuple):
        return [config_value(item, depth + 1) for item in obj]
    if isinstance(obj, set | frozenset):
        return sorted((config_value(item, depth + 1) for item in obj), key=repr)
    if isinstance(obj, type) or callable(obj) and not dataclasses.is_dataclass(obj):
        return qualified_name(obj)
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, PurePath):
        return str(obj)
    if dataclasses.is_dataclass(obj):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.repr}
        return {"class": qualified_name(type(obj)), **config_value(fields, depth + 1)}
    return _ADDRESS.sub("", repr(obj))


def _module_record(config: AlgorithmConfig) -> dict[str, Any] | None:
    """The RLModule the algorithm will build: its class and model config."""
    try:
        spec = config.rl_module_spec
    except Exception:  # old API stack, or a spec RLlib cannot resolve without the env
        return None
    module_class = getattr(spec, "module_class", None)
    model_config = getattr(spec, "model_config", None)
    if model_config is None:
        try:
            model_config = config.model_config
        except Exception:
            model_config = None
    record = {
        "class": qualified_name(module_class) if module_class is not None else None,
        "model_config": config_value(model_config),
    }
    resolve = getattr(module_class, "resolved_init", None)
    if callable(resolve):
        try:
            record["init"] = config_value(resolve(model_config))
        except ValueError:
            pass  # a bad init key: building the module fails with that key's message
    return record


# Private to_dict() keys whose public property resolves RLlib's defaults cheaply (`is_atari`,
# say, would build the env).
_RESOLVED_PROPERTIES = ("train_batch_size_per_learner", "model_config", "learner_class")


def _public_values(config: AlgorithmConfig, values: Mapping[str, Any]) -> dict[str, Any]:
    """`train_batch_size_per_learner` beside `_train_batch_size_per_learner`, `model_config`
    (RLlib's defaults merged in) beside `_model_config`, the default `learner_class`."""
    public = {}
    for name in _RESOLVED_PROPERTIES:
        if f"_{name}" in values and name not in values:
            try:
                public[name] = getattr(config, name)
            except Exception:  # a property that needs what only the algorithm knows
                continue
    return public


def config_record(
    config: AlgorithmConfig, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """config.json's content for `config` (with Tune's per-trial `overrides` applied)."""
    values = config.to_dict()
    values.update(_public_values(config, values))
    if overrides:
        values.update(overrides)
    record = {
        "algorithm_class": qualified_name(config.algo_class) if config.algo_class else None,
        "module": _module_record(config),
        **config_value(values),
    }
    redacted: dict[str, Any] = redact_record(record)
    return redacted


def trial_config_record(config: AlgorithmConfig, trial_config: Mapping[str, Any]) -> dict[str, Any]:
    """A Tune trial's resolved config: the run's config updated with the trial's values."""
    try:
        resolved = config.copy(copy_frozen=False)
        resolved.update_from_dict(dict(trial_config))
        return config_record(resolved)
    except Exception:  # a search space RLlib cannot apply: record the values as given
        return config_record(config, trial_config)


def flat_config(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys (`env_config.episode_length`, `module.model_config.hidden_size`) of
    config.json's scalar values; a list is one value (its JSON text)."""
    import json

    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_config(value, name + "."))
        elif isinstance(value, list | Mapping):
            flat[name] = json.dumps(value, sort_keys=True)
        else:
            flat[name] = value
    return flat


def config_lookup(record: Mapping[str, Any] | None, key: str) -> tuple[bool, Any]:
    """(found, value) for a dotted key of config.json (`lr`, `env_config.episode_length`)."""
    if not isinstance(record, Mapping):
        return False, None
    flat = flat_config(record)
    if key in flat:
        return True, flat[key]
    return nested_lookup(record, key)


def nested_lookup(record: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """(found, value) for a dotted key followed through nested mappings (any record)."""
    node: Any = record
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node
