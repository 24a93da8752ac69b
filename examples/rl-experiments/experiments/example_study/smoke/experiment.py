"""Tiny PPO on CartPole: the smallest complete recipe, to check an install end to end.

Budgets: smoke = 2 iterations of 200 env steps (seconds); cpu (the default) = 20
iterations of 2000 steps. Measured times: the study README.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import RETURN_KEY, Recipe, Results, RunContext, run_algorithm


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps per iteration (train_batch_size_per_learner)
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    checkpoint_every: int  # iterations between checkpoints (0: none but the last)


SMOKE = Budget(iterations=2, train_batch=200, minibatch=100, num_epochs=2, checkpoint_every=0)
CPU = Budget(iterations=20, train_batch=2000, minibatch=250, num_epochs=6, checkpoint_every=5)


def build_config(plan: Budget) -> PPOConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            lr=3e-4,
        )
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
    )


def run(context: RunContext[Budget]) -> Results:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    result = run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_every=plan.checkpoint_every,
    )
    # result.json: each headline number named once (`rl-harness compare --metric NAME`).
    results = Results()
    results.add("iterations", result.iterations)
    results.add("episode_return_mean", result.final_metrics.get(RETURN_KEY))
    return results


# What the harness reads: the budgets, chosen by name, never by the hardware: `--smoke`
# (= `--budget smoke`), `--budget cpu` (the default); `--set iterations=40` changes one
# setting; `--show-settings` lists them.
RECIPE = Recipe(run=run, budgets={"smoke": SMOKE, "cpu": CPU}, default="cpu")
