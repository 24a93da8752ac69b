"""A remote env runner (num_env_runners > 0, what the GPU hardware profiles use) builds the
HMM env from ENV_ID alone and samples the stateful transformer with per-step K/V storage.

Before ENV_ID named the importing form, every remote env runner died at start with
"Namespace rl_harness not found" (the worker process had never imported rl_harness), so the
flagship's FULL budget on a GPU could not start."""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import StatefulTransformerActorCritic, store_kv_steps
from tests.envs.helpers import mess3_config

MODEL = {
    "max_seq_len": 8,
    "context": 8,
    "d_model": 16,
    "num_heads": 2,
    "num_layers": 1,
    "prev_action": False,
}


def test_remote_env_runner_trains_the_stateful_transformer_on_env_id(ray_session):
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=mess3_config(episode_length=32))
        .env_runners(
            num_env_runners=1,
            num_envs_per_env_runner=2,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=32,
        )
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=StatefulTransformerActorCritic, model_config=MODEL
            )
        )
        .debugging(seed=0)
    )
    algo = store_kv_steps(config).build_algo()
    try:
        assert algo.env_runner_group.num_healthy_remote_workers() == 1
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= 64
        learner = result["learners"]["default_policy"]
        assert np.isfinite(learner["total_loss"])
    finally:
        algo.stop()
