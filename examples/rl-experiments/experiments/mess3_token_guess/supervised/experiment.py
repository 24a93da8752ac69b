"""The supervised baseline: the same transformer, trained on the same tokens by next-token
cross-entropy instead of reward.

What it shows: the `ppo` leaf's agent, env, episodes, budget and optimizer settings, with
one change: the learner's loss is only the cross-entropy of the policy logits against the
token the process emits next (SupervisedNextTokenLossMixin; the target is info["token"] one
step ahead, written into the train batch by InfoTargetsToBatch). PPO's policy, value and
entropy terms are never computed, so this is plain next-token prediction (the belief-geometry
paper's training objective) run through the same harness: same seeds, records, checkpoints
and number of tokens as `ppo`. Its greedy guess (argmax of the logits) and its probes
compare one to one with the RL agent's.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_token_guess.supervised.experiment --smoke
    uv run rl-harness experiments.mess3_token_guess.supervised.experiment --seed 0
    uv run rl-harness experiments.mess3_token_guess.supervised.experiment \
        --budget full --hardware-profile single-gpu   # FULL: 2.5M tokens

Writes the same files as `ppo`; the learning curve's third panel is the training loss in
bits per token against the exact conditional entropy of a 10-token window.

Budgets (`BUDGETS`: `--smoke`, `--budget cpu` default, `--budget full`; `--set KEY=VALUE`):
identical to `ppo`'s (a test checks). Results to expect: see
the study README (CPU budget, 3 seeds).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_token_guess import shared
from rl_harness import RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import TransformerActorCritic
from rl_harness.losses import NEXT_TOKEN_TARGETS, InfoTargetsToBatch, SupervisedNextTokenLossMixin


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


class SupervisedLearner(SupervisedNextTokenLossMixin, PPOTorchLearner):
    """PPO's learner pipeline (sampling, minibatches, epochs, optimizer) with the next-token
    cross-entropy as its only loss."""


def module_spec() -> RLModuleSpec:
    return RLModuleSpec(module_class=TransformerActorCritic, model_config=MODEL_CONFIG)


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig for this leaf: a caller's edits never leak into the next run."""
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=shared.env_config(info=["token"]))
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            lr=1e-4,  # the ppo leaf's: only the loss differs
            gamma=0.0,  # unused by the loss; as the ppo leaf, so sampling is the same
            lambda_=0.0,
            entropy_coeff=0.0,
        )
        .learners(
            learner_class=SupervisedLearner,
            learner_connector=functools.partial(InfoTargetsToBatch, targets=NEXT_TOKEN_TARGETS),
        )
        .rl_module(rl_module_spec=module_spec())
    )


def run(context: RunContext) -> dict:
    plan: Budget = context.settings  # BUDGETS[--budget], --set applied (the harness)
    # Step 0 (the initial weights), iterations 1, 2, 4, ... and the last: what the analysis probes.
    result = run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(),
    )
    record = shared.analyze(
        context,
        label="supervised",
        plan=plan,
        training_curve=shared.TrainingCurve(
            key="learners/default_policy/next_token/loss_bits",
            per=None,
            label="training cross-entropy (bits per token, last minibatch)",
            references={
                "10-token entropy H(X11 | X1..X10)": shared.ceilings()["window_entropy_bits"],
                "newest token only H(X2 | X1)": shared.ceilings()["newest_token_entropy_bits"],
            },
        ),
    )
    return shared.summary(result, record)
