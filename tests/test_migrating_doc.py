"""docs/migrating.md's worked example stays runnable: its recipe builds a fresh PPOConfig
whose env and module construct and act (no training: that is the CLI's job)."""

from __future__ import annotations

import dataclasses
import re
import types

import numpy as np
import torch
from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness.envs.hmm import ENV_ID, HMMVectorEnv
from rl_harness.learners.models import TransformerActorCritic
from tests.test_architecture import REPO

DOC = REPO / "docs" / "migrating.md"


def worked_example() -> types.ModuleType:
    text = DOC.read_text(encoding="utf-8").split("## Worked example", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the worked example should be one python block"
    module = types.ModuleType("migrated_experiment")
    exec(compile(blocks[0], str(DOC), "exec"), module.__dict__)
    return module


def test_the_worked_example_builds_and_acts():
    recipe = worked_example()
    assert callable(recipe.run)
    config = recipe.build_config(True)
    assert isinstance(config, PPOConfig) and config.env == ENV_ID
    assert recipe.build_config(True) is not config
    assert config.train_batch_size_per_learner == 2048
    assert recipe.build_config(False).train_batch_size_per_learner == 32_768
    env = HMMVectorEnv(2, config.env_config)
    obs, _ = env.reset(seed=0)
    assert env.single_observation_space.shape == (64 * 3,)
    assert env.single_action_space.shape == (2,)
    spec = dataclasses.replace(
        config.rl_module_spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    module = spec.build()
    assert isinstance(module, TransformerActorCritic)
    out = module.forward_inference({"obs": torch.as_tensor(obs)})
    assert out["action_dist_inputs"].shape == (2, 4)  # mean and log-std of a 2-d Gaussian
    _, reward, _, _, _ = env.step(np.zeros((2, 2), dtype=np.float32))
    assert reward.shape == (2,) and np.isfinite(reward).all()
    env.close()
