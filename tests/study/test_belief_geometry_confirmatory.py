"""The flagship's registered confirmatory test (issue 52): the plan's numbers follow from its
stated inputs, and its test is computed, refused and decided as the plan says."""

from __future__ import annotations

import pytest
from scipy import stats

from rl_harness import Results
from rl_harness.analysis import holm_adjust, t_test_power

pytest.importorskip("experiments.mess3_belief_geometry.confirmatory")
from experiments.mess3_belief_geometry import confirmatory  # noqa: E402

PLAN = confirmatory.PLAN


def _result(value: float, inits: int = PLAN.n_untrained) -> Results:
    results = Results()
    results.add(PLAN.metric, value)
    for j in range(inits):
        results.add(f"{PLAN.key}/k{PLAN.k}/r2_control_{j}", 0.5)
    return results


def test_the_plan_takes_the_fewest_seeds_reaching_its_power() -> None:
    # One-sided at Holm's first level (alpha / 2 arms) is the two-sided test at 2 alpha / 2.
    level = 2 * PLAN.alpha / len(PLAN.arms)
    n = PLAN.n_seeds
    assert t_test_power(n, PLAN.planning_sd, PLAN.smallest_effect, level) >= PLAN.power
    assert t_test_power(n - 1, PLAN.planning_sd, PLAN.smallest_effect, level) < PLAN.power
    assert PLAN.seeds == tuple(range(5, 5 + n))
    # The exploratory runs used seeds 0-4: the confirmatory seeds are new ones.
    assert min(PLAN.seeds) > 4
    assert PLAN.metric == "incremental_r2_sampled/k6/agent_minus_controls_min"


def test_no_confirmatory_run_is_registered_before_its_plan() -> None:
    assert set(confirmatory.RUNS) == set(PLAN.arms)


def test_the_test_is_a_one_sided_t_over_seeds_holm_over_the_arms() -> None:
    a = [0.04, 0.01, 0.05, 0.02, 0.03, 0.06, 0.02, 0.04, 0.01, 0.03, 0.05, 0.02, 0.04]
    b = [0.01, -0.02, 0.03, 0.00, -0.01, 0.02, 0.01, -0.03, 0.02, 0.00, 0.01, -0.01, 0.02]
    runs = [(PLAN.arms[0], s, _result(v)) for s, v in zip(PLAN.seeds, a, strict=True)]
    runs += [(PLAN.arms[1], s, _result(v)) for s, v in zip(PLAN.seeds, b, strict=True)]
    rows = confirmatory.evaluate(runs)
    ps = [float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue) for x in (a, b)]
    assert [row.p for row in rows] == pytest.approx(ps)
    assert [row.p_holm for row in rows] == pytest.approx(holm_adjust(ps))
    assert rows[0].verdict == "confirmed" and rows[1].verdict == "not confirmed"
    table = confirmatory.block(runs)
    assert "| reward_only_memory | 13 of 13 | +0.032 |" in table
    assert "| confirmed |" in table and "| not confirmed |" in table


def test_a_partial_set_is_incomplete_whatever_its_p() -> None:
    runs = [(PLAN.arms[0], s, _result(0.5 + 0.01 * s)) for s in PLAN.seeds[:4]]
    rows = confirmatory.evaluate(runs)
    assert rows[0].p is not None and rows[0].p < 1e-3
    assert rows[0].verdict == f"incomplete (4 of {PLAN.n_seeds} seeds)"
    assert rows[1].values == () and rows[1].p is None


@pytest.mark.parametrize("seed", [0, 4, 5 + 13])
def test_a_run_outside_the_planned_seeds_is_refused(seed: int) -> None:
    with pytest.raises(ValueError, match="not in the plan"):
        confirmatory.evaluate([(PLAN.arms[0], seed, _result(0.1))])


def test_a_seed_twice_and_a_run_without_the_statistic_are_refused() -> None:
    twice = [(PLAN.arms[0], 5, _result(0.1)), (PLAN.arms[0], 5, _result(0.2))]
    with pytest.raises(ValueError, match="twice"):
        confirmatory.evaluate(twice)
    one = Results()
    one.add("incremental_r2_sampled/k6/agent_minus_control", 0.1)  # one init: not the plan's
    with pytest.raises(ValueError, match="not 3 untrained inits"):
        confirmatory.evaluate([(PLAN.arms[0], 5, one)])
    with pytest.raises(ValueError, match="not 3 untrained inits"):  # more inits: not it either
        confirmatory.evaluate([(PLAN.arms[0], 5, _result(0.1, inits=4))])
    undefined = Results()
    undefined.add(PLAN.metric, None)  # recorded, undefined: refused, not read as a number
    for j in range(PLAN.n_untrained):
        undefined.add(f"{PLAN.key}/k{PLAN.k}/r2_control_{j}", 0.5)
    with pytest.raises(ValueError, match="undefined"):
        confirmatory.evaluate([(PLAN.arms[0], 5, undefined)])
