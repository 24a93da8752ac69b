"""InfoTargetsToBatch on real RLlib episodes (and RLlib's own PPO extension piece)."""

from __future__ import annotations

import json

import pytest
from ray.rllib.connectors.learner import AddOneTsToEpisodesAndTruncate
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rl_harness.learners.connectors import InfoTargetsToBatch

TOKENS = [2, 0, 1, 1, 2]  # token in info[i]; info[0] is the reset info


def _episode(tokens=TOKENS) -> SingleAgentEpisode:
    n = len(tokens) - 1
    return SingleAgentEpisode(
        observations=[[float(i)] for i in range(n + 1)],
        infos=[{"token": t, "other": -1} for t in tokens],
        actions=[0] * n,
        rewards=[0.0] * n,
        len_lookback_buffer=0,
    )


def _run(connector, episodes, shared_data=None):
    batch: dict = {}
    connector(rl_module=None, batch=batch, episodes=episodes, shared_data=shared_data or {})
    return batch


def _column(batch, name, episode):
    (items,) = batch[name].values()
    assert list(batch[name]) == [(episode.id_,)]
    return list(items)


def test_shift_one_gives_the_next_token_for_each_action():
    episode = _episode()
    batch = _run(InfoTargetsToBatch(targets={"next_token_aux": {"info_key": "token"}}), [episode])
    assert _column(batch, "next_token_aux/targets", episode) == [0, 1, 1, 2]
    assert _column(batch, "next_token_aux/target_valid", episode) == [True] * 4


def test_shift_zero_and_two_namespaces_in_one_piece():
    episode = _episode()
    connector = InfoTargetsToBatch(
        targets={
            "next_token_aux": {"info_key": "token", "shift": 1},
            "state_aux": {"info_key": "token", "shift": 0},
        }
    )
    batch = _run(connector, [episode])
    assert _column(batch, "state_aux/targets", episode) == [2, 0, 1, 1]
    assert _column(batch, "next_token_aux/targets", episode) == [0, 1, 1, 2]


def test_after_ppo_extension_the_bootstrap_step_has_no_target():
    episode = _episode()
    shared: dict = {}
    batch: dict = {}
    AddOneTsToEpisodesAndTruncate()(
        rl_module=None, batch=batch, episodes=[episode], shared_data=shared
    )
    assert len(episode) == 5  # 4 real steps + the artificial one
    connector = InfoTargetsToBatch(
        targets={
            "next_token_aux": {"info_key": "token"},
            "state_aux": {"info_key": "token", "shift": 2},
        }
    )
    connector(rl_module=None, batch=batch, episodes=[episode], shared_data=shared)
    assert _column(batch, "next_token_aux/targets", episode)[:4] == [0, 1, 1, 2]
    assert _column(batch, "next_token_aux/target_valid", episode) == [True] * 4 + [False]
    # shift 2: the last real step's target lies past the chunk, whatever info was copied.
    assert _column(batch, "state_aux/targets", episode)[:3] == [1, 1, 2]
    assert _column(batch, "state_aux/target_valid", episode) == [True] * 3 + [False] * 2


def test_negative_info_values_are_not_targets():
    episode = _episode([-1, 0, 2])  # e.g. token -1 at reset
    connector = InfoTargetsToBatch(targets={"state_aux": {"info_key": "token", "shift": 0}})
    batch = _run(connector, [episode])
    assert _column(batch, "state_aux/targets", episode) == [0, 0]
    assert _column(batch, "state_aux/target_valid", episode) == [False, True]


def test_missing_info_key_names_the_key_and_step():
    episode = _episode()
    episode.infos[3] = {"other": 1}  # the env forgot the token at step 3
    connector = InfoTargetsToBatch(targets={"next_token_aux": {"info_key": "token"}})
    with pytest.raises(KeyError, match=r"step 3 .* no 'token'"):
        _run(connector, [episode])


@pytest.mark.parametrize(
    ("targets", "match"),
    [
        ({}, r"targets must be a non-empty dict .*, got \{\}$"),
        ({"next_token_aux": {"info_key": ""}}, r"\['info_key'\] must be a str, got ''$"),
        (
            {"next_token_aux": {"info_key": "token", "shift": -1}},
            r"\['shift'\] must be an int >= 0, got -1$",
        ),
        (
            {"next_token_aux": {"info_key": "token", "offset": 1}},
            r"targets\['next_token_aux'\] must be \{'info_key': str, 'shift': int\}, got",
        ),
        ({"bad/name": {"info_key": "token"}}, "aux namespace must be a non-empty name without"),
    ],
)
def test_bad_target_specs_are_rejected(targets, match):
    with pytest.raises(ValueError, match=match):
        InfoTargetsToBatch(targets=targets)


def test_constructor_args_are_json_for_checkpoints():
    targets = {"next_token_aux": {"info_key": "token", "shift": 1}}
    _, kwargs = InfoTargetsToBatch(targets=targets).get_ctor_args_and_kwargs()
    assert json.loads(json.dumps(kwargs["targets"])) == targets
