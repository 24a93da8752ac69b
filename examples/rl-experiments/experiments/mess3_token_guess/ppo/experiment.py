"""Does PPO, rewarded for guessing the next MESS3 token, build the belief-state geometry?

What it shows: the agent sees the last 10 tokens of passive MESS3 (x 0.05, alpha 0.85) and
is paid 1 whenever its action is the token the process emits next (NextTokenTask). With
gamma 0 each guess is scored by its own reward alone (a contextual bandit), whose best
policy is the Bayes-optimal guess argmax_k P(next token = k | belief). Its agent is the
belief-geometry paper's transformer (Shai et al. 2024): d_model 64, 4 pre-norm layers, 1
head of width 8, ReLU MLP of width 256, learned positions, a strict 10-token window,
initialised as the original study's (MODEL_CONFIG: trunk N(0, 0.02), zero biases, input
projection without a bias, heads at PyTorch's scale; `ppo_default_init` is this leaf with the
library's default initialisation, the init ablation). The
question: as its greedy accuracy climbs toward the Bayes-optimal accuracy, does an affine
probe of its post-final-norm residual recover the exact belief (the fractal), also within
branches of equal last 2 tokens, and how does that compare with the supervised leaf at the
same tokens?

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_token_guess.ppo.experiment --smoke
    uv run rl-harness experiments.mess3_token_guess.ppo.experiment --seed 0
    uv run rl-harness experiments.mess3_token_guess.ppo.experiment \
        --budget full --hardware-profile single-gpu   # FULL: 2.5M env steps

Writes results/<run-id>/probe_metrics.json (accuracy and probe at step 0 and at log-spaced
checkpoints, every residual depth at the last one, the exact ceilings), fractal.png and
learning_curve.png; result.json holds the summary (shared.summary).

Budgets (`BUDGETS`, chosen by name, never by the hardware): `--smoke` (= `--budget smoke`)
SMOKE, `--budget cpu` CPU (the default), `--budget full` FULL; `--set KEY=VALUE` changes one
setting, `--show-settings` lists them all.
Results to expect: see the study README (CPU budget, 3 seeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_token_guess import shared
from rl_harness import RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import TransformerActorCritic


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps (= guessed tokens) per iteration
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized env copies per env runner
    probe_episodes: int  # probe episodes at every checkpoint (a quarter held out)
    warmup_steps: int  # played before recording, so the 10-token window is full
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval


# One small iteration and small probes: checks the recipe end to end.
SMOKE = Budget(
    iterations=1,
    train_batch=1024,
    minibatch=256,
    num_epochs=1,
    num_envs=8,
    probe_episodes=8,
    warmup_steps=16,
    probe_steps=32,
    n_bootstrap=50,
)
# CPU default: meant to fit 30 minutes end to end on 2 cores (measured: study README).
CPU = Budget(
    iterations=24,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=32,
    probe_episodes=64,
    warmup_steps=16,
    probe_steps=256,
    n_bootstrap=1000,
)
# 77 x 32,768 = 2,523,136 env steps (>= 2.5M): `--budget full` (a GPU recommended).
FULL = Budget(
    iterations=77,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=64,
    probe_episodes=256,
    warmup_steps=16,
    probe_steps=256,
    n_bootstrap=1000,
)
# Chosen by name (`--budget NAME`, `--smoke` = smoke), never by the hardware plan.
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"

# The belief-geometry paper's transformer on the env's newest-first 10-token window.
MODEL_CONFIG = {
    # The original study's initialisation (issue 37): trunk weights N(0, 0.02), trunk biases
    # 0, input projection without a bias, policy and value heads at PyTorch's scale.
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
    "context_len": shared.TOKEN_WINDOW,
    "feature_dim": 3,  # MESS3 tokens, one-hot: each position is one token
    "newest_first": True,
    "d_model": 64,
    "num_layers": 4,
    "num_heads": 1,
    "d_head": 8,
    "ff_dim": 256,
    "mlp_activation": "relu",
    "positions": "learned",
    "final_norm": True,
    # The learner computes each distinct window prefix of a minibatch once: the same
    # function and parameters as per-window, several times faster (docs/performance.md).
    "train_forward": "prefix_shared",
}


def module_spec(model_config: Mapping[str, Any] = MODEL_CONFIG) -> RLModuleSpec:
    return RLModuleSpec(module_class=TransformerActorCritic, model_config=dict(model_config))


def build_config(plan: Budget, model_config: Mapping[str, Any] = MODEL_CONFIG) -> PPOConfig:
    """A fresh PPOConfig for this leaf: a caller's edits never leak into the next run."""
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=shared.env_config(info=[]))
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            # The token-guess family's PPO settings: a guess never changes the process, so
            # gamma 0 and lambda 0 are exact (the advantage is the reward less the value).
            lr=1e-4,
            gamma=0.0,
            lambda_=0.0,
            clip_param=0.2,
            vf_loss_coeff=0.5,
            entropy_coeff=0.0,
            # Stated, not chosen to match: the original study's PPO had no KL term, these
            # runs keep RLlib's (coefficient 0.2; README, what the evidence does not show).
            use_kl_loss=True,
        )
        .rl_module(rl_module_spec=module_spec(model_config))
    )


def run(
    context: RunContext, *, model_config: Mapping[str, Any] = MODEL_CONFIG, label: str = "ppo"
) -> dict:
    """Train and analyse; `model_config` and `label` are the init-ablation leaf's
    (ppo_default_init), which is this leaf with another initialisation."""
    plan: Budget = context.settings  # BUDGETS[--budget], --set applied (the harness)
    # Step 0 (the initial weights), iterations 1, 2, 4, ... and the last: what the analysis probes.
    result = run_algorithm(
        build_config(plan, model_config),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(),
    )
    record = shared.analyze(
        context,
        label=label,
        plan=plan,
        training_curve=shared.TrainingCurve(
            key="env_runners/episode_return_mean",
            per="env_runners/episode_len_mean",
            label="training hit rate (sampled guesses)",
            references={"Bayes-optimal": shared.ceilings()["bayes_optimal_accuracy"]},
        ),
    )
    return shared.summary(result, record)
