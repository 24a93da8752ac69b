"""Supervised next-token training as a Learner (issue 29 item 2): on passive MESS3 the loss
falls to the process's entropy rate, the algorithm's own loss is never used (the value head
stays as built), and a missing target column or a non-Discrete action fails clearly."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import (
    ENV_ID,
    filter_beliefs,
    mixed_state_presentation,
    next_token_probabilities,
)
from rl_harness.envs.mess3 import mess3_model
from rl_harness.learners.models import MLPActorCritic, TransformerActorCritic
from rl_harness.losses import (
    NEXT_TOKEN_TARGETS,
    InfoTargetsToBatch,
    SupervisedNextTokenLossMixin,
    next_token_loss,
)

WINDOW = 4
X, ALPHA = 0.05, 0.85


class SupervisedLearner(SupervisedNextTokenLossMixin, PPOTorchLearner):
    pass


class _KeepLosses:
    """Observer: keeps what compute_loss_for_module returned (no behaviour change)."""

    def compute_loss_for_module(self, **kwargs):
        loss = super().compute_loss_for_module(**kwargs)
        self.losses = [*getattr(self, "losses", []), (loss, kwargs["fwd_out"], kwargs["batch"])]
        return loss


class ObservedSupervisedLearner(_KeepLosses, SupervisedNextTokenLossMixin, PPOTorchLearner):
    pass


def _env_config(info=("token",), task="NextTokenTask") -> dict:
    return {
        "model": "rl_harness.envs.mess3:mess3_model",
        "model_kwargs": {"x": X, "alpha": ALPHA},
        "task": f"rl_harness.envs.mess3.tasks:{task}",
        "episode_length": 64,
        "token_window": WINDOW,
        "info": list(info),
    }


def _config(learner_class=SupervisedLearner, connector=True, env_config=None, module=None):
    learners = {"learner_class": learner_class}
    if connector:
        learners["learner_connector"] = functools.partial(
            InfoTargetsToBatch, targets=NEXT_TOKEN_TARGETS
        )
    spec = module or RLModuleSpec(
        module_class=TransformerActorCritic,
        model_config={
            "context_len": WINDOW,
            "feature_dim": 3,
            "newest_first": True,
            "d_model": 32,
            "num_layers": 1,
            "num_heads": 2,
            "ff_dim": 64,
        },
    )
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=env_config or _env_config())
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=16,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=1024,
            minibatch_size=256,
            num_epochs=4,
            lr=3e-3,
            gamma=0.0,
            lambda_=0.0,
        )
        .learners(**learners)
        .rl_module(rl_module_spec=spec)
        .debugging(seed=0)
    )


def _expected_cross_entropy_bits(module, n: int = 4000) -> tuple[float, float]:
    """(E[-sum_k p_k log2 q_k], H(X_{W+1} | X_1..X_W)) on fresh stationary windows: p the
    exact next-token law given the window (filtered from the stationary start), q the
    module's prediction. The first is the second plus the mean KL (>= 0)."""
    model = mess3_model(x=X, alpha=ALPHA)
    tokens = model.sample(WINDOW, np.random.default_rng(1), n_sequences=n).tokens
    exact = next_token_probabilities(model, filter_beliefs(model, tokens)[:, WINDOW])
    newest_first = torch.as_tensor(tokens[:, ::-1].copy())
    obs = torch.nn.functional.one_hot(newest_first, 3).float().reshape(n, -1)
    with torch.no_grad():
        logits = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    log_q = torch.log_softmax(logits, dim=-1).double().numpy()
    sampled_window_entropy = -(exact * np.log(exact)).sum(-1).mean()
    return float(-(exact * log_q).sum(-1).mean() / np.log(2)), float(
        sampled_window_entropy / np.log(2)
    )


def test_supervised_loss_falls_to_the_entropy_rate_and_leaves_the_value_head_alone():
    model = mess3_model(x=X, alpha=ALPHA)
    entropies = mixed_state_presentation(model, 10).conditional_entropies()
    entropy_rate = entropies[-1]  # H(X_11 | X_1..X_10), converged to 1e-4 bits
    assert entropy_rate == pytest.approx(1.1447, abs=5e-4)  # ~1.15 bits (DESIGN.md)
    memoryless = entropies[1]  # H(X_2 | X_1): what the newest token alone gives

    algo = _config().build_algo()
    try:
        module = algo.learner_group._learner.module["default_policy"]
        value_head = [p.detach().clone() for p in module.vf.parameters()]
        policy_head = [p.detach().clone() for p in module.pi.parameters()]
        before, _ = _expected_cross_entropy_bits(module)
        losses = [
            algo.train()["learners"]["default_policy"]["next_token/loss_bits"] for _ in range(3)
        ]
        after, window_entropy = _expected_cross_entropy_bits(module)
    finally:
        algo.stop()
    assert before > 1.55  # PPO's small initial logits: about uniform, log2 3 = 1.585
    assert window_entropy == pytest.approx(entropies[WINDOW], abs=0.02)
    # Uses the window (beats the newest token alone) and lands near the entropy rate.
    assert after < memoryless - 0.03
    assert after < entropy_rate + 0.05
    assert after >= entropies[WINDOW] - 0.02  # nothing beats the exact predictor
    assert all(np.isfinite(losses)) and max(losses) < 1.45
    # Only the cross-entropy trained: the value head never got a gradient; pi did.
    assert all(torch.equal(a, b) for a, b in zip(value_head, module.vf.parameters(), strict=True))
    assert any(
        not torch.equal(a, b) for a, b in zip(policy_head, module.pi.parameters(), strict=True)
    )


def test_the_learner_loss_is_exactly_the_masked_next_token_cross_entropy():
    algo = _config(learner_class=ObservedSupervisedLearner).build_algo()
    try:
        algo.train()
        learner = algo.learner_group._learner
    finally:
        algo.stop()
    assert learner.losses
    for loss, fwd_out, batch in learner.losses:
        expected, _ = next_token_loss(fwd_out[Columns.ACTION_DIST_INPUTS], batch)
        assert torch.equal(loss, expected)
    # PPO's appended bootstrap steps carry no target: some rows are masked out.
    assert not all(bool(batch["next_token/target_valid"].all()) for _, _, batch in learner.losses)


def test_missing_target_column_fails_naming_the_connector():
    algo = _config(connector=False).build_algo()
    try:
        with pytest.raises(KeyError, match="InfoTargetsToBatch"):
            algo.train()
    finally:
        algo.stop()


def test_a_box_action_space_fails_at_build():
    class BoxActionEnv(gym.Env):
        observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

        def __init__(self, config=None):
            super().__init__()

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {"token": 0}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {"token": 0}

    config = (
        PPOConfig()
        .environment(BoxActionEnv)
        .env_runners(num_env_runners=0)
        .learners(learner_class=SupervisedLearner)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MLPActorCritic, model_config={}))
    )
    with pytest.raises(ValueError, match="Discrete action space"):
        config.build_algo()
