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
learning_curve.png, r2_over_training.png, interventions.json and .png; result.json). Budgets,
PPO and agent: the study's spec (spec.py), as `reward_only`'s; this leaf adds only the head,
its target and its learner (tested).
Results: the study README (run ids, dates, the measured times of each budget).
"""

from __future__ import annotations

import functools

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_belief_geometry import analysis, spec, task
from experiments.mess3_belief_geometry.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    SMOKE,  # noqa: F401
    Budget,
)
from rl_harness import Recipe, RunContext, run_algorithm
from rl_harness.analysis import run_stages
from rl_harness.learners.models import (
    KVCacheLearnerMixin,
    NextTokenAuxHeadMixin,
    StatefulTransformerActorCritic,
)
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin

AUX_WEIGHT = 0.5  # next-visible-token cross-entropy weight in the learner's total loss
# The head's target: the token the agent sees next (delay 1: info["token"] of this step).
AUX_TARGETS = {"next_token_aux": {"info_key": "token", "shift": 0}}
# The spec's agent plus the head's size.
MODEL_CONFIG = spec.MODEL_CONFIG | {"next_token_aux/num_classes": 3}  # MESS3's tokens


class NextTokenAuxTransformer(NextTokenAuxHeadMixin, StatefulTransformerActorCritic):
    """The stateful transformer actor-critic plus a next-token classifier on its representation."""


class NextTokenAuxPPOLearner(KVCacheLearnerMixin, NextTokenAuxLossMixin, PPOTorchLearner):
    """PPO's loss plus next_token_aux/weight * next-visible-token cross-entropy, with each
    training chunk's start cache rebuilt from the stored per-step keys/values."""


def module_spec() -> RLModuleSpec:
    """The agent: reward_only's transformer plus the next-visible-token head."""
    return spec.module_spec(NextTokenAuxTransformer, MODEL_CONFIG)


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's, with the token in info, the head and its learner."""
    env_config = task.env_config(info=["token"], point=task.point_of(plan))
    config = spec.ppo_config(plan, env_config=env_config, module_spec=module_spec())
    return config.learners(
        learner_class=NextTokenAuxPPOLearner,  # composes KVCacheLearnerMixin, as the spec needs
        learner_config_dict={"next_token_aux/weight": AUX_WEIGHT},
        learner_connector=functools.partial(InfoTargetsToBatch, targets=AUX_TARGETS),
    )


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (analysis.stages).
ANALYSIS_STAGES = analysis.stages(
    label="next_token_aux",
    module_spec=module_spec(),
    aux_weight=AUX_WEIGHT,
    interventions=True,
)


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=analysis.checkpoint_schedule(plan),
    )
    return dict(run_stages(context, ANALYSIS_STAGES)["result"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)
