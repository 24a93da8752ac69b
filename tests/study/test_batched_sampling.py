"""Batched acting connectors (learners.connectors.batched_acting) sample, bit for bit, the
episodes RLlib's per-item pieces sample, for both studies' real configs: the flagship's
stateful transformer with per-step K/V storage and the token-guess transformer. RLlib's own
env runner (no Ray), short episodes so that resets and the cuts between sample() calls fall
inside the run."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from experiments.mess3_belief_geometry.reward_only import experiment as flagship
from experiments.mess3_token_guess.ppo import experiment as token_guess
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl_harness.learners.connectors.batched_acting import (
    BatchedObservations,
    ListifyBatch,
    batched_acting,
)
from rl_harness.learners.connectors.kv_cache import (
    KV_CACHE_START,
    kv_cache_env_to_module,
    kv_steps_module_to_env,
)


def _flagship_config(batched: bool, untimed: bool = True):
    config = flagship.build_config(flagship.SMOKE)
    config.environment(env_config={**config.env_config, "episode_length": 24})
    config.env_runners(num_envs_per_env_runner=3, num_env_runners=0)
    config.rl_module(model_config={**config.rl_module_spec.model_config, "max_seq_len": 8})
    config.debugging(seed=5)
    if not untimed:  # the pieces RLlib's pipelines time one by one (before UntimedPipeline)
        config.env_runners(
            env_to_module_connector=functools.partial(kv_cache_env_to_module, untimed=False),
            module_to_env_connector=functools.partial(kv_steps_module_to_env, untimed=False),
        )
    if not batched:
        config.env_runners(
            env_to_module_connector=functools.partial(kv_cache_env_to_module, batched=False),
            module_to_env_connector=functools.partial(kv_steps_module_to_env, batched=False),
        )
    return config


def _token_guess_config(batched: bool, untimed: bool = True):
    config = token_guess.build_config(token_guess.SMOKE)
    config.environment(env_config={**config.env_config, "episode_length": 24})
    config.env_runners(num_envs_per_env_runner=3, num_env_runners=0)
    config.debugging(seed=5)
    if not untimed:  # the recipe's batched_acting, its pieces timed one by one by RLlib
        config.env_runners(
            env_to_module_connector=None,
            module_to_env_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
            add_default_connectors_to_module_to_env_pipeline=True,
        )
        batched_acting(config, untimed=False)
    if not batched:  # RLlib's default acting pipelines
        config.env_runners(
            env_to_module_connector=None,
            module_to_env_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
            add_default_connectors_to_module_to_env_pipeline=True,
        )
    return config


def _piece_names(pipeline) -> list[str]:
    """Class names of a pipeline's pieces, nested pipelines' pieces after their own name."""
    names = []
    for piece in pipeline.connectors:
        names.append(type(piece).__name__)
        if isinstance(piece, ConnectorPipelineV2):
            names += _piece_names(piece)
    return names


def _sample(config, rounds: int, steps: int, metrics: list | None = None):
    runner = SingleAgentEnvRunner(config=config)  # seeds torch and numpy from the config
    try:
        names = _piece_names(runner._env_to_module) + _piece_names(runner._module_to_env)
        episodes = []
        for _ in range(rounds):
            episodes += runner.sample(num_timesteps=steps, random_actions=False)
        if metrics is not None:
            metrics.append(runner.get_metrics())
        return episodes, names
    finally:
        runner.stop()


def _assert_same(a, b) -> None:
    """Two lists of episodes equal in every stored column, bit for bit."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.t_started, len(x), x.is_terminated, x.is_truncated) == (
            y.t_started,
            len(y),
            y.is_terminated,
            y.is_truncated,
        )
        assert np.array_equal(x.get_observations(), y.get_observations())
        assert np.array_equal(x.get_actions(), y.get_actions())
        assert np.array_equal(x.get_rewards(), y.get_rewards())
        assert set(x.extra_model_outputs) == set(y.extra_model_outputs)
        for key in x.extra_model_outputs:
            xs, ys = x.get_extra_model_outputs(key), y.get_extra_model_outputs(key)
            if isinstance(xs, dict):
                assert set(xs) == set(ys)
                for name in xs:
                    assert np.array_equal(xs[name], ys[name]), (key, name)
                    assert np.asarray(xs[name]).dtype == np.asarray(ys[name]).dtype
            else:
                assert np.array_equal(xs, ys), key
                assert np.asarray(xs).dtype == np.asarray(ys).dtype, key
        start_x, start_y = x.custom_data.get(KV_CACHE_START), y.custom_data.get(KV_CACHE_START)
        assert (start_x is None) == (start_y is None)
        if start_x is not None:
            assert set(start_x) == set(start_y)
            for name in start_x:
                assert np.array_equal(start_x[name], start_y[name]), name


@pytest.mark.parametrize("study", ["flagship", "token_guess"])
def test_batched_acting_samples_the_episodes_rllibs_pieces_sample(study):
    make = _flagship_config if study == "flagship" else _token_guess_config
    # 4 x 20 steps over 3 envs of 24-step episodes (the flagship's first lengths random):
    # resets inside every round, ongoing episodes cut and continued.
    new, new_names = _sample(make(batched=True), rounds=4, steps=20)
    old, old_names = _sample(make(batched=False), rounds=4, steps=20)
    assert "BatchedObservations" in new_names and "ListifyBatch" in new_names
    assert "BatchedObservations" not in old_names and "UnBatchToIndividualItems" in old_names
    assert any(e.is_done for e in new) and any(e.t_started > 0 for e in new)
    _assert_same(new, old)
    # Not a comparison of two empty runs: the policy sampled (different) actions.
    actions = np.concatenate([e.get_actions() for e in new])
    assert len(np.unique(actions, axis=0)) > 1
    if study == "flagship":
        assert any(KV_CACHE_START in e.custom_data for e in new)
        assert Columns.STATE_OUT in new[0].extra_model_outputs


def test_listify_batch_refuses_a_batch_with_a_time_rank_or_missing_rows():
    piece = ListifyBatch()
    batch = {Columns.ACTION_LOGP: np.zeros(2, np.float32)}
    with pytest.raises(ValueError, match="time rank"):
        piece(
            rl_module=None,
            batch=dict(batch),
            episodes=[object(), object()],
            shared_data={"_added_single_ts_time_rank": True, "memorized_map_structure": ["a", "b"]},
        )
    with pytest.raises(ValueError, match="one row per episode"):
        piece(rl_module=None, batch=dict(batch), episodes=[object(), object()], shared_data={})


def test_batched_acting_refuses_a_config_with_its_own_connectors():
    config = _flagship_config(batched=True)  # store_kv_steps set its own pipelines
    with pytest.raises(ValueError, match="own acting connectors"):
        batched_acting(config)
    assert BatchedObservations  # exported piece, used by store_kv_steps' pipeline


def _previous_rotate(x, cos, signed_sin):
    """The rotation before the arena (tests/learners/test_acting_arena.py checks it)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * signed_sin


def _flagship_transformer(runner):
    module = runner.module
    return (
        module.transformer
        if hasattr(module, "transformer")
        else module["default_policy"].transformer
    )


def test_the_acting_arena_samples_the_episodes_fresh_buffers_sample(monkeypatch):
    """The flagship's acting through its K/V arena and no-concatenation rotation (this
    library) samples, bit for bit, the episodes of the previous acting arithmetic (a fresh
    buffer per step, `ARENA_STEPS = 0`, and the concatenating rotation)."""
    import rl_harness.learners.components.stateful_transformer as st

    def sample(previous: bool):
        runner = SingleAgentEnvRunner(config=_flagship_config(batched=True))
        transformer = _flagship_transformer(runner)
        try:
            episodes = []
            with monkeypatch.context() as patch:
                if previous:
                    transformer.ARENA_STEPS = 0
                    patch.setattr(st, "rotate", _previous_rotate)
                for _ in range(4):
                    episodes += runner.sample(num_timesteps=20, random_actions=False)
            return episodes, transformer
        finally:
            runner.stop()

    new, transformer = sample(previous=False)
    old, _ = sample(previous=True)
    assert transformer._arena is not None and transformer._arena.head > 1  # used in place
    assert any(e.is_done for e in new) and any(e.t_started > 0 for e in new)
    _assert_same(new, old)


def _connector_timers(metrics: dict) -> set[str]:
    """Names of the connector pieces RLlib timed (env runner results, both pipelines)."""
    names = set()
    for side in ("env_to_module_connector", "module_to_env_connector"):
        names |= set(metrics.get(side, {}).get("timers", {}).get("connectors", {}))
    return names


@pytest.mark.parametrize("study", ["flagship", "token_guess"])
def test_untimed_pipelines_sample_the_episodes_the_timed_pieces_sample(study):
    """Each acting pipeline's pieces as one UntimedPipeline (the default) sample, bit for
    bit, the episodes of the same pieces RLlib's pipeline times one by one; only RLlib's
    per-piece connector timers are gone."""
    make = _flagship_config if study == "flagship" else _token_guess_config
    new_metrics: list = []
    old_metrics: list = []
    new, new_names = _sample(make(batched=True), rounds=4, steps=20, metrics=new_metrics)
    old, old_names = _sample(
        make(batched=True, untimed=False), rounds=4, steps=20, metrics=old_metrics
    )
    assert new_names.count("UntimedPipeline") == 2 and "UntimedPipeline" not in old_names
    assert [n for n in new_names if n != "UntimedPipeline"] == old_names
    assert any(e.is_done for e in new) and any(e.t_started > 0 for e in new)
    _assert_same(new, old)
    actions = np.concatenate([e.get_actions() for e in new])
    assert len(np.unique(actions, axis=0)) > 1
    # What went: RLlib's timer per piece (one per pipeline is left, the UntimedPipeline's).
    assert {"batched_observations", "get_actions", "listify_batch"} <= _connector_timers(
        old_metrics[0]
    )
    assert _connector_timers(new_metrics[0]) == {"untimed_pipeline"}
