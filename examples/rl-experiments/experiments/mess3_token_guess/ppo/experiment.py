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

Budgets, agent, sampling and optimizer: the study's spec (spec.py); this leaf adds PPO's loss
settings. Budgets (`BUDGETS`, chosen by name, never by the hardware): `--smoke` (=
`--budget smoke`) SMOKE, `--budget cpu` CPU (the default), `--budget full` FULL; `--set
KEY=VALUE` changes one setting, `--show-settings` lists them all.
Results to expect: see the study README (CPU budget, 3 seeds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_token_guess import shared, spec
from experiments.mess3_token_guess.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    MODEL_CONFIG,
    SMOKE,  # noqa: F401
    Budget,
    module_spec,  # noqa: F401
)
from rl_harness import LENGTH_KEY, RETURN_KEY, Recipe, RunContext, run_algorithm
from rl_harness.analysis import AnalysisStage, run_stages


def build_config(plan: Budget, model_config: Mapping[str, Any] = MODEL_CONFIG) -> PPOConfig:
    """A fresh PPOConfig: the study's, with PPO's loss settings."""
    return spec.ppo_config(plan, model_config=model_config).training(
        clip_param=0.2,
        vf_loss_coeff=0.5,
        # Stated, not chosen to match: the original study's PPO had no KL term, these
        # runs keep RLlib's (coefficient 0.2; README, what the evidence does not show).
        use_kl_loss=True,
    )


def training_curve() -> shared.TrainingCurve:
    return shared.TrainingCurve(
        key=RETURN_KEY,
        per=LENGTH_KEY,
        label="training hit rate (sampled guesses)",
        references={"Bayes-optimal": shared.ceilings()["bayes_optimal_accuracy"]},
    )


def analysis_stages(label: str) -> tuple[AnalysisStage, ...]:
    """The analysis of a PPO leaf of this study (`label`: this one's or an ablation's)."""
    return shared.stages(label=label, training_curve=training_curve)


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (shared.stages).
ANALYSIS_STAGES = analysis_stages("ppo")


def run(
    context: RunContext[Budget],
    *,
    model_config: Mapping[str, Any] = MODEL_CONFIG,
    label: str = "ppo",
    build: Callable[[Budget], PPOConfig] | None = None,
) -> dict:
    """Train and analyse; `model_config` and `label` are the init-ablation leaf's
    (ppo_default_init), `build` the KL ablation's (ppo_no_kl): this leaf but for one thing;
    each declares its ANALYSIS_STAGES as `analysis_stages(label)`, what this runs."""
    plan = context.settings  # the chosen budget, --set applied (the harness)
    # Step 0 (the initial weights), iterations 1, 2, 4, ... and the last: what the analysis probes.
    run_algorithm(
        build_config(plan, model_config) if build is None else build(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=shared.checkpoint_schedule(),
    )
    return dict(run_stages(context, analysis_stages(label))["result"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)
