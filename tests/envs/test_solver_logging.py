"""A first (uncached) solve says what it is doing on the stdlib logger
"rl_harness.envs.mess3.solvers": one INFO line when it starts, one when it ends; a cache
hit logs nothing. Small problems, so each solve takes well under a second."""

from __future__ import annotations

import logging

import pytest

from rl_harness.envs.mess3.solvers import (
    OccupancyProblem,
    solve_belief_vi,
    solve_oracle,
    solve_stack,
)

LOGGER = "rl_harness.envs.mess3.solvers"
PROBLEM = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)


@pytest.fixture
def solver_lines(caplog, monkeypatch):
    """The solver logger's INFO lines, whatever an earlier configure_logging did to the
    parent "rl_harness" logger (its console handler stops propagation to caplog's)."""
    monkeypatch.setattr(logging.getLogger("rl_harness"), "propagate", True)
    caplog.set_level(logging.INFO, logger=LOGGER)

    def lines(beats: bool = False) -> list[str]:
        # "still solving" lines come every HEARTBEAT_S (30 s): a loaded machine adds some.
        found = [
            r.getMessage()
            for r in caplog.records
            if r.name.startswith(LOGGER)
            and r.levelno == logging.INFO
            and (beats or not r.getMessage().startswith("still solving "))
        ]
        caplog.clear()
        return found

    return lines


def solves(cache):
    return {
        "oracle": lambda: solve_oracle(PROBLEM, per_axis=9, cache=cache),
        "belief_vi": lambda: solve_belief_vi(
            PROBLEM, 1, per_edge=4, per_axis=5, polish_rounds=0, cache=cache
        ),
        "reactive": lambda: solve_stack(
            PROBLEM, 0, 1, per_axis=3, scan_per_axis=2, n_starts=2, cache=cache
        ),
    }


@pytest.mark.parametrize(
    ("solver", "start"),
    [
        ("oracle", "solving oracle: state known, 3 states: value iteration over 81 lattice"),
        ("belief_vi", "solving belief_vi (delay 1): relative value iteration on 15 grid beliefs"),
        (
            "reactive",
            "solving reactive table (delay 0): 3 windows, a 3-state joint chain; global "
            "scan of 64 tables; ascent from the scan's best 2, 2 random start tables",
        ),
    ],
)
def test_a_first_solve_logs_its_start_and_end_and_a_cached_one_nothing(
    tmp_path, solver_lines, solver, start
):
    solve = solves(tmp_path)[solver]
    first = solve()
    assert first.converged  # so it is cached
    opening, ending = solver_lines()
    assert opening.startswith(start)
    name = start.removeprefix("solving ").split(":")[0]
    assert ending.startswith(f"solved {name}: value {first.value:.6f}, converged True, ")
    assert ending.endswith(" s")
    again = solve()  # served from the cache: silent
    assert again.value == first.value
    assert solver_lines() == []
    solves(False)[solver]()  # no cache: computed, so it says so again
    assert len(solver_lines()) == 2


def test_stack_k_logs_each_level_it_computes(tmp_path, solver_lines):
    # stack_2 runs stack_1 first (its optima start stack_2): two solves, each logged; then
    # only the uncached one.
    options = {"per_axis": 3, "scan_per_axis": 2, "n_starts": 2, "cache": tmp_path}
    solve_stack(PROBLEM, 0, 1, **options)
    solver_lines()
    solve_stack(PROBLEM, 0, 2, **options)
    lines = solver_lines()
    assert [line.split(":")[0] for line in lines] == [
        "solving stack_2 table (delay 0)",
        "solved stack_2 table (delay 0)",
    ]
    assert "global scan of 262,144 tables" in lines[0]
    assert "lifted stack_1 optima" in lines[0]


def test_a_long_first_solve_says_it_is_still_solving(tmp_path, solver_lines, monkeypatch):
    from rl_harness.envs.mess3.solvers import cache

    # A real solve of about 0.3 s (many GIL switch intervals of 5 ms), a beat every ms.
    monkeypatch.setattr(cache, "HEARTBEAT_S", 0.001)
    solution = solves(tmp_path)["reactive"]()
    lines = solver_lines(beats=True)
    assert lines[0].startswith("solving reactive") and lines[-1].startswith("solved reactive")
    beats = lines[1:-1]
    assert beats and all(
        line.startswith("still solving reactive table (delay 0): ") for line in beats
    )
    assert beats[0].endswith(" s so far")
    assert solution.converged
