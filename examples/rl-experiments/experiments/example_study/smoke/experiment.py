"""Tiny PPO on CartPole: the smallest complete recipe, to check an install end to end.

Budget: smoke = 2 iterations of 200 env steps (seconds); full = 20 iterations of
2000 steps. Measured times: the study README.
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import RunContext, run_algorithm


def build_config(smoke: bool) -> PPOConfig:
    batch = 200 if smoke else 2000
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(
            train_batch_size_per_learner=batch,
            minibatch_size=100 if smoke else 250,
            num_epochs=2 if smoke else 6,
            lr=3e-4,
        )
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
    )


def run(context: RunContext) -> dict:
    result = run_algorithm(
        build_config(context.smoke),
        context,
        stop=2 if context.smoke else 20,
        checkpoint_every=0 if context.smoke else 5,
    )
    return {
        "iterations": result.iterations,
        "episode_return_mean": result.final_metrics.get("env_runners/episode_return_mean"),
    }
