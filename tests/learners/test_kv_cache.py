"""Per-step K/V storage (learners.connectors.kv_cache): episodes hold each step's new key/value
only, and the cache every training chunk starts from, rebuilt in the learner connector, is
bit for bit the cache acting had at that step (through RLlib's own env runner, across
episode resets and the cuts between sample() calls)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns

from rl_harness.learners.connectors.kv_cache import (
    K_STEP,
    KV_CACHE_START,
    V_STEP,
    BatchedNormalizeAndClipActions,
    KVCacheChunkStarts,
    KVCachePPOLearner,
    KVStepsToEpisodes,
    chunk_start_caches,
    kv_steps_module_to_env,
    store_kv_steps,
)
from rl_harness.learners.models import (
    PREV_ACTIONS,
    StatefulTransformerActorCritic,
    prev_action_env_to_module,
    prev_action_learner,
)
from tests.learners.ppo_setup import tiny_ppo_config
from tests.learners.recall_env import RecallEnv

# max_seq_len 3 < context - 1 = 5: a chunk's cache reaches back past the chunk before it,
# and past the cut between two sample() calls into the chunk start cache.
MODEL = {"max_seq_len": 3, "context": 6, "d_model": 16, "num_heads": 2, "num_layers": 2}


def _config(**env_runners):
    config = tiny_ppo_config(
        StatefulTransformerActorCritic,
        MODEL,
        env=RecallEnv,
        env_config={"vocab": 3, "episode_len": 8},
        learners={"learner_connector": prev_action_learner},
    )
    config.env_runners(num_envs_per_env_runner=2, **env_runners)
    return store_kv_steps(config)


class RecordCaches(ConnectorV2):
    """Module-to-env, before KVStepsToEpisodes: the whole cache acting carries into each
    episode's next step (from the module's batched output, rows in RLlib's batching
    order), keyed by (episode id, the step it is read at)."""

    def __init__(self, log: dict, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    def __call__(self, *, rl_module, batch, episodes, shared_data=None, **kwargs):
        by_id = {episode.id_: episode for episode in episodes}
        state = batch[Columns.STATE_OUT]
        for row, episode_id in enumerate(shared_data["memorized_map_structure"]):
            if episode_id in by_id and by_id[episode_id].is_reset:
                t = by_id[episode_id].t
                self.log[(episode_id, t + 1)] = {k: v[row].numpy().copy() for k, v in state.items()}
        return batch


def _recording_module_to_env(log: dict):
    def factory(env, spaces):
        pieces = kv_steps_module_to_env(env, spaces, untimed=False)
        at = next(i for i, p in enumerate(pieces) if isinstance(p, KVStepsToEpisodes))
        return [*pieces[:at], RecordCaches(log), *pieces[at:]]

    return factory


def _learner_batch(algo, episodes):
    learner = algo.learner_group._learner
    return learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=episodes, shared_data={}
    )["default_policy"]


def test_rebuilt_chunk_start_caches_equal_the_caches_acting_had():
    log: dict = {}
    config = _config()
    config.env_runners(module_to_env_connector=_recording_module_to_env(log))
    algo = config.build_algo()
    try:
        names = [type(p).__name__ for p in algo.learner_group._learner._learner_connector]
        assert names.index("KVCacheChunkStarts") == names.index("AddTimeDimToBatchAndZeroPad") + 1
        module = algo.learner_group._learner.module["default_policy"].unwrapped()
        initial = module.get_initial_state()
        checked, continued = 0, 0
        for _ in range(3):  # 3 x 13 steps over 2 envs: cuts mid-episode, resets inside
            episodes = algo.env_runner.sample(num_timesteps=13, random_actions=False)
            chunks = [(e.id_, e.t_started, len(e)) for e in episodes]  # before PPO renames
            state_in = _learner_batch(algo, episodes)[Columns.STATE_IN]
            row = 0
            for episode_id, t_started, length in chunks:
                continued += t_started > 0
                for start in range(0, length + 1, 3):  # + PPO's bootstrap step
                    t = t_started + start
                    acted = initial if t == 0 else log[(episode_id, t)]
                    for key in ("k", "v", "n"):
                        assert np.array_equal(state_in[key][row].numpy(), acted[key]), (key, t)
                    row += 1
                    checked += 1
            assert row == len(state_in["n"])
        assert continued >= 2 and checked >= 20
    finally:
        algo.stop()


def test_episodes_hold_each_steps_new_keys_and_values_only():
    algo = _config().build_algo()
    try:
        algo.env_runner.sample(num_timesteps=10, random_actions=False)
        episodes = algo.env_runner.sample(num_timesteps=10, random_actions=False)
    finally:
        algo.stop()
    for episode in episodes:
        stored = episode.get_extra_model_outputs(Columns.STATE_OUT)
        assert set(stored) == {K_STEP, V_STEP}
        assert stored[K_STEP].shape == stored[V_STEP].shape == (len(episode), 2, 16)
        if episode.t_started > 0:  # a cut chunk carries the cache it starts from, once
            start = episode.custom_data[KV_CACHE_START]
            assert start["t"] == episode.t_started and start["k"].shape == (2, 5, 16)
    assert any(episode.t_started > 0 for episode in episodes)


def test_chunk_start_caches_take_each_slot_from_the_right_step():
    steps = np.arange(7, dtype=np.float32)[:, None, None] + 1.0  # step i stores i + 1
    k = np.broadcast_to(steps, (7, 2, 3)).copy()
    # Reset at step 0, context 4 (3 cached steps), chunks of 2: starts 0, 2, 4, 6.
    fresh = chunk_start_caches(k, -k, None, t_started=0, max_seq_len=2, context=4)
    assert fresh["n"].ravel().tolist() == [0, 2, 3, 3]
    assert fresh["k"][:, 0, :, 0].tolist() == [[0, 0, 0], [0, 1, 2], [2, 3, 4], [4, 5, 6]]
    assert np.array_equal(fresh["v"], -fresh["k"])
    # A chunk cut at t=10: slots before step 0 come from the start cache (steps 7, 8, 9).
    before = np.broadcast_to(np.array([-7.0, -8.0, -9.0])[None, :, None], (2, 3, 3)).copy()
    start = {"k": before, "v": before, "n": np.array([3])}
    cut = chunk_start_caches(k, k, start, t_started=10, max_seq_len=2, context=4)
    assert cut["n"].ravel().tolist() == [3, 3, 3, 3]
    assert cut["k"][:, 1, :, 2].tolist() == [[-7, -8, -9], [-9, 1, 2], [2, 3, 4], [4, 5, 6]]


def test_a_learner_without_the_mixin_fails_instead_of_training_on_empty_caches():
    # RLlib's own state piece meets the per-step K/V (its message names "k_step").
    config = _config().learners(learner_class=PPOTorchLearner)
    algo = config.build_algo()
    try:
        with pytest.raises(ValueError, match="k_step"):
            algo.train()
    finally:
        algo.stop()


def test_an_env_runner_with_rllibs_default_state_piece_fails_naming_store_kv_steps():
    config = _config()
    config.env_runners(
        env_to_module_connector=prev_action_env_to_module,
        add_default_connectors_to_env_to_module_pipeline=True,
    )
    with pytest.raises(ValueError, match="store_kv_steps"):
        algo = config.build_algo()
        try:
            algo.env_runner.sample(num_timesteps=4, random_actions=False)
        finally:
            algo.stop()


def test_store_kv_steps_wants_the_mixin_in_a_custom_learner():
    class MyLearner(PPOTorchLearner):
        pass

    config = tiny_ppo_config(StatefulTransformerActorCritic, MODEL, env=RecallEnv)
    with pytest.raises(ValueError, match=r"class MyLearner\(KVCacheLearnerMixin, MyLearner\)"):
        store_kv_steps(config.learners(learner_class=MyLearner))
    config = tiny_ppo_config(StatefulTransformerActorCritic, MODEL, env=RecallEnv)
    assert store_kv_steps(config).learner_class is KVCachePPOLearner
    assert issubclass(KVCachePPOLearner, PPOTorchLearner)
    assert KVCacheChunkStarts.__module__ == KVCachePPOLearner.__module__


def test_acting_reads_one_step_of_attention_with_the_whole_cache():
    # The env runner's module input: one step per row (no time dim) and the whole cache,
    # (B, L, C-1, D).
    algo = _config().build_algo()
    try:
        runner = algo.env_runner
        runner.sample(num_timesteps=6, random_actions=False)
        to_module = runner._cached_to_module
    finally:
        algo.stop()
    assert to_module[Columns.OBS].shape == (2, 4)
    assert to_module[PREV_ACTIONS].shape == (2, 3)
    assert to_module[Columns.STATE_IN]["k"].shape == (2, 2, 5, 16)
    assert isinstance(to_module[Columns.STATE_IN]["k"], torch.Tensor)


def test_acting_hands_the_batched_cache_on_without_copies_between_resets():
    # Steps without a reset: STATE_IN is the module's cache out of the step before, as is.
    algo = _config().build_algo()
    try:
        runner = algo.env_runner
        runner.sample(num_timesteps=2, random_actions=False)  # 1 step per env, no reset
        shared = runner._shared_data
        stash = shared["kv_cache/state_out"]
        assert runner._cached_to_module[Columns.STATE_IN]["k"] is stash.state["k"]
        assert shared["kv_cache/state_in"].ids == stash.ids
    finally:
        algo.stop()


@pytest.mark.parametrize(("normalize", "clip"), [(True, False), (False, True), (False, False)])
def test_batched_actions_for_the_env_equal_rllibs_per_item_unsquash_and_clip(normalize, clip):
    import gymnasium as gym
    from ray.rllib.connectors.module_to_env import NormalizeAndClipActions, UnBatchToIndividualItems

    space = gym.spaces.Box(low=np.array([0.0, -3.0]), high=np.array([2.0, 0.5]), dtype=np.float32)
    obs_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    actions = np.random.default_rng(0).normal(0.0, 1.5, (5, 2)).astype(np.float32)
    ids = [f"e{i}" for i in range(5)]
    shared = {"memorized_map_structure": ids}

    ours = BatchedNormalizeAndClipActions(
        obs_space, space, normalize_actions=normalize, clip_actions=clip
    )
    batch = ours(rl_module=None, batch={Columns.ACTIONS: actions.copy()}, episodes=[])
    unbatch = UnBatchToIndividualItems(obs_space, space)
    batch = unbatch(rl_module=None, batch=batch, episodes=[], shared_data=shared)

    theirs = NormalizeAndClipActions(
        obs_space, space, normalize_actions=normalize, clip_actions=clip
    )
    reference = unbatch(
        rl_module=None, batch={Columns.ACTIONS: actions.copy()}, episodes=[], shared_data=shared
    )
    reference = theirs(rl_module=None, batch=reference, episodes=[], shared_data=shared)
    assert set(batch) == set(reference)
    for column in reference:
        for key in reference[column]:
            assert np.array_equal(batch[column][key][0], reference[column][key][0]), column
    if normalize or clip:  # the actions the env gets changed; the sampled ones stay
        sent = np.stack([batch[Columns.ACTIONS_FOR_ENV][(i,)][0] for i in ids])
        kept = np.stack([batch[Columns.ACTIONS][(i,)][0] for i in ids])
        assert not np.array_equal(sent, actions) and np.array_equal(kept, actions)


# ---------------------------------------------------------------- the harness's refusal


def _unstored_config(**model):
    """The trap: the module's spec copied without store_kv_steps (RLlib's own pipelines with
    the previous-action piece, PPO's default learner)."""
    config = tiny_ppo_config(
        StatefulTransformerActorCritic,
        MODEL | model,
        env=RecallEnv,
        env_config={"vocab": 3, "episode_len": 8},
        learners={"learner_connector": prev_action_learner},
    )
    return config.env_runners(env_to_module_connector=prev_action_env_to_module)


def test_a_harness_run_without_store_kv_steps_is_refused_before_ray(tmp_path):
    from rl_harness import make_context, run_algorithm
    from rl_harness.harness.preflight import PreflightError

    context = make_context(tmp_path, seed=0, smoke=True)
    with pytest.raises(PreflightError) as refused:
        run_algorithm(_unstored_config(), context, stop=1)
    message = str(refused.value)
    # It names the installer and the opt-out, what is missing, and the cost per step
    # (2 * 2 layers * 5 past steps * 16 floats * 4 bytes = 1.3 KB).
    assert "store_kv_steps(config)" in message and "whole_cache_per_step" in message
    assert "learner class PPOTorchLearner without KVCacheLearnerMixin" in message
    assert "RLlib's default env-to-module pieces" in message
    assert "(1.3 KB) at every env step" in message
    assert not (context.results_dir / "metrics.jsonl").exists()


def test_a_half_installed_config_is_refused_naming_what_is_missing():
    # The learner class set by hand, the env runners left with RLlib's pieces.
    from rl_harness.harness.preflight import PreflightError, check_buildable

    config = _unstored_config().learners(learner_class=KVCachePPOLearner)
    with pytest.raises(PreflightError, match="store_kv_steps") as refused:
        check_buildable(config)
    assert "KVCacheLearnerMixin" not in str(refused.value)
    assert "RLlib's default env-to-module pieces" in str(refused.value)
    assert "RLlib's default module-to-env pieces" in str(refused.value)


def test_a_bare_rllib_learner_with_the_mixin_refuses_whole_caches():
    # Outside the harness (config.build_algo()) the same half-installed setup fails at the
    # first update instead of training on RLlib's whole caches.
    algo = _unstored_config().learners(learner_class=KVCachePPOLearner).build_algo()
    try:
        with pytest.raises(RuntimeError, match="whole K/V cache at every step.*store_kv_steps"):
            algo.train()
    finally:
        algo.stop()


@pytest.mark.parametrize("stored", ["store_kv_steps", "whole_cache_per_step"])
def test_a_harness_run_trains_with_store_kv_steps_or_the_opt_out(ray_session, tmp_path, stored):
    import json

    from rl_harness import make_context, run_algorithm

    if stored == "store_kv_steps":
        config = store_kv_steps(_unstored_config())
    else:  # RLlib's own whole-cache storage, chosen explicitly
        config = _unstored_config(whole_cache_per_step=True)
    context = make_context(tmp_path, seed=0, smoke=True)
    run_algorithm(config, context, stop=1)
    rows = (context.results_dir / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])
