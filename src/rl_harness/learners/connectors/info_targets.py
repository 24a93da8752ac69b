"""Learner connector: auxiliary targets as batch columns, read from episode infos.

The env says what happened in `info` (e.g. info["token"] is the token the
latest transition emitted); this piece copies one info key, shifted in time,
into the train batch, so losses never assume an observation layout. With
shift = 1 the target of the action at step t is info[t + 1][key]: the token
that follows it.

    config.learners(
        learner_connector=functools.partial(
            InfoTargetsToBatch,
            targets={"next_token_aux": {"info_key": "token", "shift": 1}},
        ),
    )

Per namespace it writes `<ns>/targets` (int64) and `<ns>/target_valid` (bool,
False where the shifted info lies past the episode chunk or holds a negative
value, e.g. a token of -1 at reset). It runs before
RLlib's default pieces, so zero-padding and batching handle these columns
like any other; PPO's appended bootstrap step is marked not valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.utils.annotations import override

from rl_harness.learners.aux_keys import AuxKeys

# Set by RLlib's AddOneTsToEpisodesAndTruncate (PPO) after it appended one
# artificial step (with a duplicated info) to every episode.
_EXTENDED_FLAG = "_added_loss_mask_for_valid_episode_ts"


def _check_targets(targets: object) -> dict[str, tuple[str, int]]:
    if not isinstance(targets, Mapping) or not targets:
        raise ValueError(
            "targets must be a non-empty dict {namespace: {'info_key': str, 'shift': int}}, "
            f"got {targets!r}"
        )
    checked: dict[str, tuple[str, int]] = {}
    for namespace, spec in targets.items():
        AuxKeys(namespace)  # validates the name
        if not isinstance(spec, Mapping) or set(spec) - {"info_key", "shift"}:
            raise ValueError(
                f"targets[{namespace!r}] must be {{'info_key': str, 'shift': int}}, got {spec!r}"
            )
        info_key, shift = spec.get("info_key"), spec.get("shift", 1)
        if not isinstance(info_key, str) or not info_key:
            raise ValueError(f"targets[{namespace!r}]['info_key'] must be a str, got {info_key!r}")
        if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
            raise ValueError(f"targets[{namespace!r}]['shift'] must be an int >= 0, got {shift!r}")
        checked[namespace] = (info_key, shift)
    return checked


class InfoTargetsToBatch(ConnectorV2):
    """Writes `<ns>/targets` and `<ns>/target_valid` from `info[t + shift][info_key]`.

    targets: {namespace: {"info_key": str, "shift": int >= 0 (default 1)}},
    JSON-serializable, so the config that carries it stays recordable. The checked form,
    {namespace: (info_key, shift)}, is the `targets` attribute.
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        targets: Mapping[str, Mapping[str, Any]],
        **kwargs: Any,
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.targets = _check_targets(targets)

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        extended = bool((shared_data or {}).get(_EXTENDED_FLAG))
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            length = len(episode)
            # Infos 0..real_len exist for real; after PPO's extension the last one is a copy.
            real_len = length - 1 if extended else length
            for namespace, (info_key, shift) in self.targets.items():
                keys = AuxKeys(namespace)
                targets, valid = _shifted_targets(episode, info_key, shift, length, real_len)
                self.add_n_batch_items(batch, keys.targets, targets, length, episode)
                self.add_n_batch_items(batch, keys.target_valid, valid, length, episode)
        return batch


def _shifted_targets(
    episode: Any, info_key: str, shift: int, length: int, real_len: int
) -> tuple[list[int], list[bool]]:
    # Step t has a target iff info t + shift is a real one: t + shift <= real_len.
    num_valid = max(0, min(length, real_len + 1 - shift))
    infos = episode.get_infos(slice(shift, shift + num_valid)) if num_valid else []
    targets, valid = [], []
    for t, info in enumerate(infos):
        if info_key not in info:
            raise KeyError(
                f"info at step {t + shift} of episode {episode.id_} has no {info_key!r} "
                f"(it has {sorted(info)}); the env must report it for aux targets"
            )
        value = int(info[info_key])
        # Negative means "none" (e.g. token -1 at reset): no target, not a class.
        targets.append(max(value, 0))
        valid.append(value >= 0)
    pad = length - num_valid
    return targets + [0] * pad, valid + [False] * pad
