"""Does PPO, guessing the next MESS3 token while its guess tilts the process, track the belief?

The client's feedback study, ported: MESS3 (x 0.05, alpha 0.85); the guess a moves the
chain by U_a = 0.9 T + 0.1 R_a (R_a jumps to state a); reward 1 for a correct guess; the
token comes from the state the process leaves (the original timing: `emission="on_leave"`).
The agent reads the last 10 (token, previous action) pairs with the belief-geometry paper's
transformer; PPO with gamma 0 (each guess scored by its own reward; the gamma-0 optimum is
the one-step Bayes guesser, whose accuracy is 0.6996). Analysis: shared.analyze.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_feedback.ppo.experiment --smoke
    uv run rl-harness experiments.mess3_feedback.ppo.experiment --seed 0   # CPU budget
    (seeds 0, 1, 2; then: uv run rl-harness compare experiments/mess3_feedback
     --metric probe_metrics.json:probes[-1]/r2_pooled)

Writes results/<run-id>/probe_metrics.json; result.json holds shared.summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_feedback import shared
from rl_harness import Recipe, Results, RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import TransformerActorCritic


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps (= guesses) per iteration
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized env copies per env runner (and per analysis batch)
    probe_episodes: int  # probe episodes per checkpoint (a quarter held out)
    warmup_steps: int  # played before recording, so the 10-position window is full
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes
    n_permutations: int  # permutation null of the final probe's pooled R²
    ceiling_copies: int  # env copies of the Bayes guesser's 1024-step run


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
    n_permutations=20,
    ceiling_copies=16,
)
# CPU: the token-guess study's CPU budget (24 x 32,768 = 786,432 env steps); not yet timed
# on this study (its window of 10 pairs reads twice the features of the token window).
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
    n_permutations=200,
    ceiling_copies=256,
)
# 77 x 32,768 = 2,523,136 env steps, for a GPU.
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
    n_permutations=1000,
    ceiling_copies=1024,
)
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"

# The belief-geometry paper's transformer; each position is (token, previous action),
# read by name from the env's Dict observation, newest first.
MODEL_CONFIG = {
    # The original study's initialisation (issue 37): trunk weights N(0, 0.02), trunk biases
    # 0, input projection without a bias, policy and value heads at PyTorch's scale.
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
    # The learner computes each distinct window prefix of a minibatch once: the same
    # function as the per-window forward (issue 38), several times cheaper.
    "train_forward": "prefix_shared",
    "context_len": shared.WINDOW,
    "window_keys": ["tokens", "actions"],
    "newest_first": True,
    "d_model": 64,
    "num_layers": 4,
    "num_heads": 1,
    "d_head": 8,
    "ff_dim": 256,
    "mlp_activation": "relu",
    "positions": "learned",
    "final_norm": True,
}


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: a caller's edits never leak into the next run."""
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=shared.env_config(dict_observation=True))
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            # The original study's gamma 0 (lambda 0 makes the advantage reward - value).
            # The guess also moves later states; gamma 0 ignores that on purpose.
            lr=1e-4,
            gamma=0.0,
            lambda_=0.0,
            clip_param=0.2,
            vf_loss_coeff=0.5,
            entropy_coeff=0.0,
            # The original feedback study's PPO had no KL term; RLlib's default adds one
            # (0.2). Not every original family: the action-symmetry one kept the default
            # (docs/migrating.md), so copy this line only where the original had it.
            use_kl_loss=False,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=TransformerActorCritic, model_config=MODEL_CONFIG
            )
        )
    )


def run(context: RunContext[Budget]) -> Results:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    result = run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(),
    )
    record = shared.analyze(context, plan)
    return shared.summary(result.iterations, record)


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
