"""The stack_k search starts from the (k - 1) optima lifted to k-token windows. A lifted table
must act on the newest k - 1 of the k visible tokens (drop the oldest), which is exactly the
(k - 1) policy: its value equals the stack_{k-1} solution's, to rounding. Lifting by dropping
the newest token instead changes the policy, and the weak search below then ends elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.mess3.solvers import OccupancyProblem, solve_stack, table_values, windows

PROBLEM = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)


@pytest.mark.parametrize(("delay", "k"), [(1, 2), (1, 3)])
def test_lifted_starts_earn_the_lower_solution_value(tmp_path, monkeypatch, delay, k):
    monkeypatch.setattr(windows, "_TRIPLES", 0)  # the final check's cost is not tested here
    options = {"per_axis": 5, "scan_per_axis": 3, "n_starts": 2, "cache": tmp_path}
    lifted_groups: dict[int, np.ndarray] = {}
    starts = windows._starts

    def spy(problem, chain, lifted, *args):
        groups = starts(problem, chain, lifted, *args)
        if lifted is not None:
            lifted_groups[chain.k] = next(t for name, t in groups.items() if "lifted" in name)
        return groups

    monkeypatch.setattr(windows, "_starts", spy)
    lower = solve_stack(PROBLEM, delay, k - 1, **options)
    solve_stack(PROBLEM, delay, k, **options)  # the lower solve comes from the cache
    lifted = lifted_groups[k]
    assert lifted.shape[1:] == (3**k, 2)
    values = table_values(PROBLEM, delay, lifted)
    # The first lifted table is the (k - 1) solution itself, acting on k-token windows.
    assert values[0] == pytest.approx(lower.value, abs=1e-12)
    assert values.max() == pytest.approx(lower.value, abs=1e-12)
    # Window codes put the oldest token most significant: whatever the oldest token, the
    # lifted table is the (k - 1) table on the rest.
    for oldest in lifted[0].reshape(3, 3 ** (k - 1), 2):
        np.testing.assert_array_equal(oldest, lower.policy.table)
