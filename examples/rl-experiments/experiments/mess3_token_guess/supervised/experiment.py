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

Budgets (`BUDGETS`: `--smoke`, `--budget cpu` default, `--budget full`; `--set KEY=VALUE`),
agent, sampling and optimizer: the study's spec (spec.py), as `ppo`'s; this leaf adds only
its learner (a test checks). Results to expect: see the study README (CPU budget, 3 seeds).
"""

from __future__ import annotations

import functools

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from experiments.mess3_token_guess import shared, spec
from experiments.mess3_token_guess.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    MODEL_CONFIG,  # noqa: F401
    SMOKE,  # noqa: F401
    Budget,
    module_spec,  # noqa: F401
)
from rl_harness import Recipe, RunContext, learner_key, run_algorithm
from rl_harness.analysis import run_stages
from rl_harness.losses import NEXT_TOKEN_TARGETS, InfoTargetsToBatch, SupervisedNextTokenLossMixin


class SupervisedLearner(SupervisedNextTokenLossMixin, PPOTorchLearner):
    """PPO's learner pipeline (sampling, minibatches, epochs, optimizer) with the next-token
    cross-entropy as its only loss."""


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's, with the next token in the batch and this learner."""
    return spec.ppo_config(plan, info=["token"]).learners(
        learner_class=SupervisedLearner,
        learner_connector=functools.partial(InfoTargetsToBatch, targets=NEXT_TOKEN_TARGETS),
    )


def training_curve() -> shared.TrainingCurve:
    return shared.TrainingCurve(
        key=learner_key("next_token/loss_bits"),
        per=None,
        label="training cross-entropy (bits per token, last minibatch)",
        references={
            "10-token entropy H(X11 | X1..X10)": shared.ceilings()["window_entropy_bits"],
            "newest token only H(X2 | X1)": shared.ceilings()["newest_token_entropy_bits"],
        },
    )


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (shared.stages).
ANALYSIS_STAGES = shared.stages(label="supervised", training_curve=training_curve)


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    # Step 0 (the initial weights), iterations 1, 2, 4, ... and the last: what the analysis probes.
    run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(),
    )
    return dict(run_stages(context, ANALYSIS_STAGES)["result"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)
