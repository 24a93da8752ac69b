"""The confirmatory test of memory beyond a window, registered before its runs (issue 52).

The memory point's sampled-rollout test (b - c > 0: the agent's representation adds more to a
k-step window than an untrained network's does) was chosen after the greedy test had been
read, on 4 seeds per arm, against one untrained initialisation per run. Those runs are
exploratory. This file fixes, before any of its runs exists, the one test that will be read
as confirmation, so that neither the statistic, the k, the family nor the number of seeds can
be chosen after seeing the data. The commit that adds this file is the registration; runs
enter `RUNS` only with a seed in `PLAN.seeds`, trained at a later commit.

What is fixed (`PLAN`):

- data: each run's sampled rollouts (`incremental_r2_sampled`), global R²;
- statistic: at k = 6 (the longest window the study tests: memory beyond six steps is the
  strongest claim the test can make), min over the run's untrained initialisations of
  (b - c_j) (`agent_minus_controls_min`): the agent must beat every untrained network;
- test: per arm, one-sided one-sample t-test of the per-seed statistic's mean > 0 (the seed
  is the unit); the two arms are one family, Holm-corrected at alpha 0.05;
- seeds: the smallest number whose power reaches 0.8 for the smallest effect of interest
  (0.03 R²) at the planning spread (0.035: the larger per-seed SD of the exploratory runs'
  b - c at k = 6; the spread is taken from them, the effect is not), seeds 5 onwards;
- verdict: "confirmed" for an arm where its Holm p < alpha once every planned seed of it is
  in; "not confirmed" otherwise; "incomplete" before.

Power: `rl_harness.analysis.t_test_power` is two-sided; at alpha 0.05 it is the one-sided
test's power at 0.025, the level Holm gives the first of two tests, so the planned power is a
lower bound for either arm.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from rl_harness import Results
from rl_harness.analysis import holm_adjust, seeds_for_power, t_test_power


@dataclass(frozen=True)
class ConfirmatoryPlan:
    registered: str  # the date; the commit adding this file is the registration
    arms: tuple[str, ...]
    key: str  # the rollouts' record
    k: int
    statistic: str  # the named metric under f"{key}/k{k}/"
    n_untrained: int  # untrained initialisations per run (the study's analysis setting)
    smallest_effect: float  # R², the smallest b - min_j c_j worth detecting
    planning_sd: float  # per-seed SD assumed for the power computation
    alpha: float
    power: float
    first_seed: int

    @property
    def level(self) -> float:
        """The two-sided level whose power is the one-sided test's at Holm's first level."""
        return 2 * self.alpha / len(self.arms)

    @functools.cached_property
    def n_seeds(self) -> int:
        n = seeds_for_power(
            self.planning_sd, self.smallest_effect, power=self.power, alpha=self.level
        )
        if n is None:
            raise ValueError("no number of seeds reaches the planned power")
        return n

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.n_seeds))

    @property
    def metric(self) -> str:
        return f"{self.key}/k{self.k}/{self.statistic}"

    def planned_power(self) -> float:
        return t_test_power(self.n_seeds, self.planning_sd, self.smallest_effect, self.level)


PLAN = ConfirmatoryPlan(
    registered="2026-12-07",
    arms=("reward_only_memory", "next_token_aux_memory"),
    key="incremental_r2_sampled",
    k=6,
    statistic="agent_minus_controls_min",
    n_untrained=3,
    smallest_effect=0.03,
    planning_sd=0.035,
    alpha=0.05,
    power=0.8,
    first_seed=5,
)

# The confirmatory runs, by arm (seeds in PLAN.seeds only); empty until they are trained.
RUNS: dict[str, tuple[str, ...]] = {arm: () for arm in PLAN.arms}


@dataclass(frozen=True)
class ArmVerdict:
    arm: str
    values: tuple[float, ...]  # the statistic per planned seed present, in seed order
    p: float | None  # one-sided t-test of mean > 0 (None under 2 seeds)
    p_holm: float | None
    verdict: str


def evaluate(
    runs: Sequence[tuple[str, int, Results]], plan: ConfirmatoryPlan = PLAN
) -> list[ArmVerdict]:
    """Per arm of `plan`, the test on `runs` ((arm, seed, result)); a run whose seed is not
    planned, or that lacks the statistic, is refused (never silently dropped)."""
    values: dict[str, dict[int, float]] = {arm: {} for arm in plan.arms}
    for arm, seed, result in runs:
        if arm not in values or seed not in plan.seeds:
            raise ValueError(f"{arm} seed {seed} is not in the plan (seeds {plan.seeds})")
        if seed in values[arm]:
            raise ValueError(f"{arm} seed {seed} appears twice")
        # The statistic is the minimum over the planned inits: a run with fewer is not it.
        inits = f"{plan.key}/k{plan.k}/r2_control_"
        if f"{inits}{plan.n_untrained - 1}" not in result or f"{inits}{plan.n_untrained}" in result:
            raise ValueError(f"{arm} seed {seed}: not {plan.n_untrained} untrained inits")
        value = result.value(plan.metric)
        if value is None:
            raise ValueError(f"{arm} seed {seed}: {plan.metric} is undefined")
        values[arm][seed] = float(value)
    ps: list[float | None] = []
    for arm in plan.arms:
        got = [values[arm][s] for s in sorted(values[arm])]
        p = (
            float(stats.ttest_1samp(got, 0.0, alternative="greater").pvalue)
            if len(got) >= 2
            else None
        )
        ps.append(p)
    adjusted = holm_adjust(ps)
    out = []
    for arm, p, p_holm in zip(plan.arms, ps, adjusted, strict=True):
        got = tuple(values[arm][s] for s in sorted(values[arm]))
        if len(got) < plan.n_seeds:
            verdict = f"incomplete ({len(got)} of {plan.n_seeds} seeds)"
        elif p_holm is not None and p_holm < plan.alpha:
            verdict = "confirmed"
        else:
            verdict = "not confirmed"
        out.append(ArmVerdict(arm, got, p, p_holm, verdict))
    return out


def block(runs: Sequence[tuple[str, int, Results]], plan: ConfirmatoryPlan = PLAN) -> str:
    """The README's section: the plan as registered, then its test on `runs`."""
    seeds = plan.seeds
    lines = [
        f"Registered {plan.registered}, before any of its runs (the commit adding "
        "`confirmatory.py` is the registration). The runs above are exploratory: the sampled "
        "test was chosen after the greedy one was read, on 4 seeds per arm, against one "
        "untrained initialisation per run. Confirmation rests on this test alone:",
        "",
        f"- data: each run's sampled rollouts (`{plan.key}`), global R², k = {plan.k};",
        f"- statistic: min over {plan.n_untrained} untrained initialisations of b - c_j "
        f"(`{plan.metric}`);",
        "- test: per arm, one-sided one-sample t-test of mean > 0 over seeds; the "
        f"{len(plan.arms)} arms one family, Holm at alpha {plan.alpha};",
        f"- seeds {seeds[0]}-{seeds[-1]} ({plan.n_seeds} per arm, CPU budget): the fewest "
        f"with power >= {plan.power} for a smallest effect of interest of "
        f"{plan.smallest_effect} R² at a per-seed SD of {plan.planning_sd} (the larger "
        "exploratory arm's SD at k = 6; the effect is stated, not observed); planned power "
        f"{plan.planned_power():.2f}.",
        "",
        "| arm | seeds in | mean | p (one-sided t) | p (Holm over arms) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for row in evaluate(runs, plan):
        mean = f"{sum(row.values) / len(row.values):+.3f}" if row.values else "-"
        p = "-" if row.p is None else f"{row.p:.3f}"
        p_holm = "-" if row.p_holm is None else f"{row.p_holm:.3f}"
        lines.append(
            f"| {row.arm} | {len(row.values)} of {plan.n_seeds} | {mean} | {p} | {p_holm} | "
            f"{row.verdict} |"
        )
    return "\n".join(lines)
