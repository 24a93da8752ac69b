"""StatefulTransformerActorCritic: cache stepping equals the whole sequence, training sees
what acting saw (through RLlib's own env runner and learner connector), PPO on a memory task.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import StatefulTransformerEncoder
from rl_harness.learners.models import (
    PREV_ACTIONS,
    StatefulTransformerActorCritic,
    prev_action_env_to_module,
    prev_action_learner,
    store_kv_steps,
)
from tests.learners.box_env import TargetTrackingEnv
from tests.learners.ppo_setup import flat_params, tiny_ppo_config
from tests.learners.recall_env import RecallEnv

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT2 = gym.spaces.Discrete(2)
SMALL = {"max_seq_len": 4, "context": 5, "d_model": 16, "num_heads": 2, "num_layers": 2}


def _module(action_space: gym.Space = ACT2, **config):
    torch.manual_seed(0)
    return StatefulTransformerActorCritic(
        observation_space=OBS, action_space=action_space, model_config=SMALL | config
    )


def _stepped(module, obs, prev, state=None):
    reps = []
    for t in range(obs.shape[1]):
        batch = {Columns.OBS: obs[:, t], PREV_ACTIONS: prev[:, t]}
        if state is not None:
            batch[Columns.STATE_IN] = state
        rep, state = module.encode_step(batch)
        reps.append(rep)
    return torch.stack(reps, dim=1), state


def test_stepping_through_the_cache_equals_the_whole_sequence_across_chunks_and_resets():
    module = _module()
    obs, prev = torch.randn(3, 13, 3), torch.randn(3, 13, 2)
    with torch.no_grad():
        whole = module.encode({Columns.OBS: obs, PREV_ACTIONS: prev})  # empty cache
        stepped, _ = _stepped(module, obs, prev)
        # Chunks of 4 (max_seq_len), each from the state the previous chunk ended in:
        # 13 steps > context 5, so later chunks rely on the cache alone.
        chunks, state = [], None
        for start in range(0, 13, 4):
            batch = {
                Columns.OBS: obs[:, start : start + 4],
                PREV_ACTIONS: prev[:, start : start + 4],
            }
            if state is not None:
                batch[Columns.STATE_IN] = state
            out = module.forward_train(batch)
            chunks.append(out[Columns.EMBEDDINGS])
            state = module.forward_inference(batch)[Columns.STATE_OUT]
        # An episode reset: the initial state, whatever came before.
        init = {
            k: torch.as_tensor(np.stack([v] * 3)) for k, v in module.get_initial_state().items()
        }
        after_reset, _ = _stepped(module, obs[:, :6], prev[:, :6], state=init)
    assert whole.shape == (3, 13, 16)
    torch.testing.assert_close(stepped, whole, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(chunks, dim=1), whole, atol=1e-5, rtol=0)
    torch.testing.assert_close(after_reset, whole[:, :6], atol=1e-5, rtol=0)
    # The window is real: a step sees at most `context` steps (itself included).
    changed = obs.clone()
    changed[:, 0] += 1.0
    with torch.no_grad():
        other = module.encode({Columns.OBS: changed, PREV_ACTIONS: prev})
    assert not torch.allclose(other[:, 1], whole[:, 1])  # inside the window
    # With 2 layers information travels up to 2 * (context - 1) = 8 steps back.
    torch.testing.assert_close(other[:, 9:], whole[:, 9:], atol=1e-5, rtol=0)


def test_state_layout_and_encode_shapes():
    module = _module()
    assert module.is_stateful()
    init = module.get_initial_state()
    assert init["k"].shape == init["v"].shape == (2, 4, 16) and init["k"].dtype == np.float32
    assert init["n"].shape == (1,) and init["n"].dtype == np.int64
    batch = {Columns.OBS: torch.randn(2, 1, 3), PREV_ACTIONS: torch.zeros(2, 1, 2)}
    out = module.forward_exploration(batch)
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 1, 2)
    assert out[Columns.STATE_OUT]["k"].shape == (2, 2, 4, 16)
    assert out[Columns.STATE_OUT]["n"].tolist() == [[1], [1]]
    rep, state = module.encode_step(
        {Columns.OBS: torch.randn(2, 3), PREV_ACTIONS: torch.zeros(2, 2)}
    )
    assert rep.shape == (2, 16) and state["v"].shape == (2, 2, 4, 16)
    # The representation is the final LayerNorm's output (unit scale, zero bias at init).
    torch.testing.assert_close(rep.mean(-1), torch.zeros(2), atol=1e-5, rtol=0)


def test_encode_step_residuals_names_every_depth_and_ends_in_encode_step():
    module = _module()
    obs, prev = torch.randn(3, 7, 3), torch.randn(3, 7, 2)
    with torch.no_grad():
        state = None
        for t in range(6):  # a filled cache, not only the empty one
            batch = {Columns.OBS: obs[:, t], PREV_ACTIONS: prev[:, t]}
            if state is not None:
                batch[Columns.STATE_IN] = state
            residuals, res_state = module.encode_step_residuals(batch)
            rep, state = module.encode_step(batch)
            assert list(residuals) == ["embed", "block_1", "block_2", "final_norm"]
            assert all(r.shape == (3, 16) for r in residuals.values())
            assert torch.equal(residuals["final_norm"], rep)  # bit for bit
            for key in ("k", "v", "n"):
                assert torch.equal(res_state[key], state[key])
            normed = module.transformer.norm(residuals["block_2"])
            assert torch.equal(normed, residuals["final_norm"])
            # embed is the input projection of the step's token, block_1 differs from it.
            token = torch.cat((obs[:, t], prev[:, t]), -1)
            torch.testing.assert_close(residuals["embed"], module.transformer.embed(token))
            assert not torch.allclose(residuals["block_1"], residuals["embed"])


def test_box_actions_feed_back_and_prev_action_can_be_off():
    box = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    module = _module(box)
    assert module.transformer.input_dim == 3 + 3
    out = module.forward_train(
        {Columns.OBS: torch.randn(2, 4, 3), PREV_ACTIONS: torch.randn(2, 4, 3)}
    )
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 4, 6)
    module = _module(box, prev_action=False)
    assert module.transformer.input_dim == 3
    assert module.encode({Columns.OBS: torch.randn(2, 4, 3)}).shape == (2, 4, 16)


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"n_layers": 3}, ValueError, "unknown model_config key 'n_layers'; accepted keys: "),
        ({"n_heads": 4}, ValueError, "unknown model_config key 'n_heads'"),
        ({"context_len": 64}, ValueError, "unknown model_config key 'context_len'"),
        ({"max_seq_len": None}, ValueError, "max_seq_len"),
        ({"context": 1}, ValueError, r"model_config\['context'\] must be at least 2"),
        ({"prev_action": "yes"}, ValueError, r"model_config\['prev_action'\] must be true"),
        ({"d_model": 12, "num_heads": 4}, ValueError, "must be even"),
    ],
)
def test_config_errors(config, error, match):
    with pytest.raises(error, match=match):
        _module(**config)


def test_missing_prev_action_column_says_how_to_add_it():
    with pytest.raises(KeyError, match="PrevActionToBatch"):
        _module().encode({Columns.OBS: torch.randn(2, 4, 3)})


def test_encoder_rejects_bad_inputs():
    enc = StatefulTransformerEncoder(input_dim=3, context=4, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match=r"\(B, T, 3\)"):
        enc(torch.randn(2, 3))


def _recall_config(kv_steps: bool = False, **training):
    config = tiny_ppo_config(
        StatefulTransformerActorCritic,
        {"max_seq_len": 3, "context": 6, "d_model": 16, "num_heads": 2, "num_layers": 2},
        env=RecallEnv,
        env_config={"vocab": 3, "episode_len": 8},
        learners={"learner_connector": prev_action_learner},
        **training,
    )
    if kv_steps:  # per-step K/V in the episodes, chunk start caches rebuilt (kv_cache.py)
        return store_kv_steps(config)
    return config.env_runners(env_to_module_connector=prev_action_env_to_module)


@pytest.mark.parametrize("kv_steps", [False, True], ids=["whole-cache-per-step", "kv-steps"])
def test_training_chunks_see_exactly_what_acting_saw(kv_steps):
    # Real episodes from RLlib's env runner (fragments of 64 steps cut 8-step episodes
    # mid-way; resets inside), turned into max_seq_len = 3 chunks by the learner
    # connector: from the STATE_OUT RLlib stored at each chunk start, or (kv_steps) from
    # the cache rebuilt out of the stored per-step keys/values. The second sample's
    # episodes include chunks cut at the end of the first.
    algo = _recall_config(kv_steps).build_algo()
    try:
        algo.env_runner.sample(num_timesteps=30, random_actions=False)
        episodes = algo.env_runner.sample(num_timesteps=64, random_actions=False)
        assert any(episode.t_started > 0 for episode in episodes)
        learner = algo.learner_group._learner
        module = learner.module["default_policy"].unwrapped()
        batch = learner._learner_connector(
            rl_module=learner.module, batch={}, episodes=episodes, shared_data={}
        )["default_policy"]
        with torch.no_grad():
            train_inputs = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    finally:
        algo.stop()
    assert batch[Columns.OBS].shape[1] == 3
    mask = batch[Columns.LOSS_MASK]
    assert int(mask.sum()) >= 64
    acted = batch[Columns.ACTION_DIST_INPUTS]  # recorded by the env runner while acting
    torch.testing.assert_close(train_inputs[mask], acted[mask], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kv_steps", [False, True], ids=["whole-cache-per-step", "kv-steps"])
def test_ppo_iteration_runs_on_box_actions(kv_steps):
    config = tiny_ppo_config(
        StatefulTransformerActorCritic,
        {"max_seq_len": 4, "context": 4, "d_model": 16, "num_heads": 2, "num_layers": 1},
        env=TargetTrackingEnv,
        learners={"learner_connector": prev_action_learner},
    )
    if kv_steps:
        store_kv_steps(config)
    else:
        config.env_runners(env_to_module_connector=prev_action_env_to_module)
    algo = config.build_algo()
    try:
        module = algo.learner_group._learner.module["default_policy"].unwrapped()
        before = flat_params(module)
        stats = algo.train()["learners"]["default_policy"]
        assert np.isfinite(stats["total_loss"])
        assert not torch.equal(before, flat_params(module))
        torch.testing.assert_close(flat_params(algo.get_module()), flat_params(module))
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_learns_a_memory_task_a_memoryless_policy_cannot():
    env = RecallEnv({"vocab": 3, "episode_len": 8})
    ceiling = env.memoryless_best_return()  # 1 + 7 / 3 = 3.33 of 8
    algo = _recall_config(
        train_batch_size_per_learner=512, minibatch_size=128, num_epochs=6, lr=3e-3
    ).build_algo()
    try:
        returns = []
        for _ in range(40):
            returns.append(algo.train()["env_runners"]["episode_return_mean"])
            if returns[-1] > 7.0:
                break
    finally:
        algo.stop()
    print("returns", [round(r, 2) for r in returns])
    assert returns[-1] > ceiling + 3.0, (ceiling, returns)
