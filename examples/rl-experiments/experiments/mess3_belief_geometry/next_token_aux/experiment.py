"""Does a next-visible-token loss make the occupancy-control agent's belief sharper?

What it shows: the `reward_only` experiment (PPO with a causal transformer that carries its
own context, steering MESS3 occupancy control with tokens seen one step late) plus one
change: a linear classifier head on the transformer's representation, trained with
cross-entropy against the token the agent will see next, added to PPO's loss with weight
AUX_WEIGHT. Under delay 1 the token visible at step t + 1 is the one emitted on arrival in
the state of step t, which the env reports as info["token"] at step t: the target is
info["token"] with shift 0 (InfoTargetsToBatch; the reset's -1 is masked out). Its best
prediction is the decision belief pushed through the emissions, so the loss asks for the
belief directly.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux.experiment
    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux.experiment \
        --budget full --hardware-profile single-gpu   # FULL: 10M env steps, the original's budget

Writes what `reward_only` writes (probe_metrics.json, solver_values.json, belief_simplex.png,
learning_curve.png, r2_over_training.png, interventions.json and .png; result.json). Budgets
and agent: exactly `reward_only`'s (tested).
Results: the study README (run ids, dates, the measured times of each budget).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_belief_geometry import shared
from rl_harness import RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import (
    KVCacheLearnerMixin,
    NextTokenAuxHeadMixin,
    StatefulTransformerActorCritic,
    store_kv_steps,
)
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps per iteration (train_batch_size_per_learner)
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized env copies per env runner
    probe_episodes: int  # episodes rolled out per policy for evaluation and the probe
    warmup_steps: int  # steps each probe episode plays before recording
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval
    n_permutations: int  # refits of each permutation null (global, within-branch)
    window_k_max: int  # window baselines k = 1..window_k_max
    training_probe_episodes: int  # greedy episodes replayed through each checkpoint
    intervention_episodes: int  # first greedy episodes the interventions use (1/4 edited)
    intervention_steps: int  # recorded steps of each edited (after the warm-up)


# One tiny iteration and a small probe: checks the recipe end to end (measured times in
# the study README).
SMOKE = Budget(
    iterations=1,
    train_batch=512,
    minibatch=256,
    num_epochs=1,
    num_envs=4,
    probe_episodes=8,
    warmup_steps=16,
    probe_steps=64,
    n_bootstrap=100,
    n_permutations=10,
    window_k_max=2,
    training_probe_episodes=8,
    intervention_episodes=8,
    intervention_steps=16,
)
# CPU default: reward_only's budget (62 x 32,768 = 2,031,616 env steps; measured times in the
# study README).
CPU = Budget(
    iterations=62,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=32,
    probe_episodes=256,
    warmup_steps=256,
    probe_steps=512,
    n_bootstrap=1000,
    n_permutations=100,
    window_k_max=6,
    training_probe_episodes=64,
    # Interventions: 64 x (256 + 256) steps replayed through the agent and the control, the
    # 16 held-out episodes edited 4 ways at 2 layers (shared.INTERVENTION_LAYERS); not timed.
    intervention_episodes=64,
    intervention_steps=256,
)
# The original study's budget: 306 x 32,768 = 10,027,008 env steps (>= 10M), for the
# `--budget full` (on a GPU with --hardware-profile single-gpu: the study README's vast
# command, 3 seeds).
FULL = Budget(
    iterations=306,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=64,
    probe_episodes=256,
    warmup_steps=256,
    probe_steps=512,
    n_bootstrap=1000,
    n_permutations=100,
    window_k_max=6,
    training_probe_episodes=64,
    # Interventions: 64 x (256 + 256) steps replayed through the agent and the control, the
    # 16 held-out episodes edited 4 ways at 2 layers (shared.INTERVENTION_LAYERS); not timed.
    intervention_episodes=64,
    intervention_steps=256,
)
# Chosen by name (`--budget NAME`, `--smoke` = smoke), never by the hardware plan.
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"


# The original study's transformer size. The previous action comes in the observation (the
# env's action_window), so the module's own prev-action input stays off.
AUX_WEIGHT = 0.5  # next-visible-token cross-entropy weight in the learner's total loss
# The head's target: the token the agent sees next (delay 1: info["token"] of this step).
AUX_TARGETS = {"next_token_aux": {"info_key": "token", "shift": 0}}
MODEL_CONFIG = {
    # The original study's initialisation (issue 37): trunk weights N(0, 0.02), trunk biases
    # 0, input projection without a bias, policy and value heads at PyTorch's scale.
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
    "max_seq_len": 64,
    "context": 64,
    "d_model": 96,
    "num_heads": 4,
    "num_layers": 3,
    "prev_action": False,
    "next_token_aux/num_classes": 3,  # MESS3's tokens
}


class NextTokenAuxTransformer(NextTokenAuxHeadMixin, StatefulTransformerActorCritic):
    """The stateful transformer actor-critic plus a next-token classifier on its representation."""


class NextTokenAuxPPOLearner(KVCacheLearnerMixin, NextTokenAuxLossMixin, PPOTorchLearner):
    """PPO's loss plus next_token_aux/weight * next-visible-token cross-entropy, with each
    training chunk's start cache rebuilt from the stored per-step keys/values."""


def module_spec() -> RLModuleSpec:
    """The agent: reward_only's transformer plus the next-visible-token head."""
    return RLModuleSpec(module_class=NextTokenAuxTransformer, model_config=MODEL_CONFIG)


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig for this leaf: a caller's edits never leak into the next run."""
    config = (
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
            # The original study's PPO settings.
            lr=3e-4,
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            vf_loss_coeff=0.5,
            entropy_coeff=0.003,
            # The original study's PPO had no KL term; RLlib's default adds one (0.2).
            use_kl_loss=False,
        )
        .learners(
            learner_class=NextTokenAuxPPOLearner,
            learner_config_dict={"next_token_aux/weight": AUX_WEIGHT},
            learner_connector=functools.partial(InfoTargetsToBatch, targets=AUX_TARGETS),
        )
        .rl_module(rl_module_spec=module_spec())
    )
    # Episodes store each step's new key/value, not the whole 64-step cache (issue 26).
    return store_kv_steps(config)


def run(context: RunContext) -> dict:
    plan: Budget = context.settings  # BUDGETS[--budget], --set applied (the harness)
    result = run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(plan),
    )
    record = shared.analyze(
        context,
        label="next_token_aux",
        module_spec=module_spec(),
        plan=plan,
        aux_weight=AUX_WEIGHT,
        interventions=True,
    )
    return shared.summary(result, record)
