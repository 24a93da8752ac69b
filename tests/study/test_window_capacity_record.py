"""window_capacity.recorded_matches: how the check's recorded-MLP rows match the run's own
incremental_r2_sampled record, for a one-init record and for one of several untrained inits
(no single (c): its (a) and (b) are still compared), and at a k the run's record lacks."""

from __future__ import annotations

import pytest
from experiments.mess3_belief_geometry import window_capacity


def _scores(value: float, within: float) -> dict:
    return {"r2_pooled": {"value": value}, "within_branch": {"tokens_2": {"value": within}}}


def _row(k: int, window: float, agent: float, control: float | None) -> dict:
    """A table row; control None: a row of several untrained inits (no `control`, each init
    in `controls`), as IncrementalRow.to_dict writes it."""
    row = {"k": k, "window": _scores(window, window - 0.1), "agent": _scores(agent, agent - 0.1)}
    if control is None:
        return row | {"controls": {"control": _scores(0.5, 0.4), "control_1": _scores(0.5, 0.4)}}
    return row | {"control": _scores(control, control - 0.1)}


def _check(rows: list[dict]) -> dict:
    return {"regressors": [{"name": "recorded", "table": {"rows": rows}}]}


def test_recorded_rows_are_compared_point_by_point():
    mine = _check([_row(1, 0.5, 0.6, 0.55), _row(2, 0.8, 0.9, 0.85)])
    theirs = {"table": {"rows": [_row(1, 0.5, 0.6, 0.55), _row(2, 0.8, 0.9, 0.85 * 1.001)]}}
    matches = window_capacity.recorded_matches(mine, theirs)
    assert matches["1"] == 0.0
    # The largest relative difference at k = 2 is the control's within-branch point.
    assert matches["2"] == pytest.approx(0.85 * 0.001 / (0.85 * 1.001 - 0.1))


def test_a_record_of_several_inits_compares_a_and_b_and_a_missing_k_is_none():
    mine = _check([_row(1, 0.5, 0.6, 0.55), _row(3, 0.9, 0.95, 0.93)])
    theirs = {"table": {"rows": [_row(1, 0.5, 0.6 * 1.01, None)]}}
    matches = window_capacity.recorded_matches(mine, theirs)
    # The largest: the agent's within-branch point (the control's is skipped, not an error).
    assert matches["1"] == pytest.approx(0.6 * 0.01 / (0.6 * 1.01 - 0.1))
    assert matches["3"] is None


def test_a_point_missing_on_one_side_only_is_no_match():
    mine = _check([_row(1, 0.5, 0.6, 0.55)])
    theirs = {"table": {"rows": [_row(1, 0.5, 0.6, 0.55)]}}
    theirs["table"]["rows"][0]["agent"]["within_branch"]["tokens_2"] = None
    assert window_capacity.recorded_matches(mine, theirs) == {"1": None}
