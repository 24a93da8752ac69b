"""Across-seed statistics against known answers (R's t.test / p.adjust / power.t.test)."""

from __future__ import annotations

import pytest

from rl_harness.analysis import holm_adjust, seed_test, seeds_for_power, t_test_power


def test_seed_test_matches_a_hand_computed_t_test() -> None:
    # mean 2, sd 1, n 3: t = 2 / (1 / sqrt 3) = 3.4641, df 2 -> two-sided p = 0.07418;
    # t(0.975, 2) = 4.3027 -> interval 2 -/+ 4.3027 / sqrt 3 = [-0.4841, 4.4841]
    result = seed_test([1.0, 2.0, 3.0])
    assert result.n == 3 and result.mean == pytest.approx(2.0)
    assert result.sd == pytest.approx(1.0)
    assert result.p_value == pytest.approx(0.07418, abs=1e-5)
    assert result.low == pytest.approx(-0.4841, abs=1e-4)
    assert result.high == pytest.approx(4.4841, abs=1e-4)


def test_seed_test_edges() -> None:
    one = seed_test([0.3])
    assert (one.mean, one.low, one.p_value) == (0.3, None, None)
    equal = seed_test([0.5, 0.5])
    assert (equal.low, equal.high, equal.p_value) == (0.5, 0.5, 0.0)
    with pytest.raises(ValueError, match="non-finite"):
        seed_test([1.0, float("inf")])
    with pytest.raises(ValueError, match="at least one"):
        seed_test([])


def test_holm_matches_p_adjust() -> None:
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # step-down monotone: a larger raw p never gets a smaller adjusted one; capped at 1
    assert holm_adjust([0.5, 0.4, None]) == pytest.approx([0.8, 0.8, None])
    assert holm_adjust([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError):
        holm_adjust([1.5])


def test_power_matches_power_t_test() -> None:
    # R: power.t.test(n = 10, delta = 1, sd = 1, type = "one.sample") -> power 0.8031
    assert t_test_power(10, 1.0, 1.0) == pytest.approx(0.8031, abs=1e-3)
    # R: power.t.test(delta = 1, sd = 1, power = 0.8, type = "one.sample") -> n = 9.94
    assert seeds_for_power(1.0, 1.0) == 10
    # the effect, not its sign, matters; a smaller effect needs more seeds
    assert seeds_for_power(1.0, -1.0) == 10
    assert seeds_for_power(1.0, 0.5) > 10
    assert seeds_for_power(1.0, 1e-4, max_seeds=50) is None
