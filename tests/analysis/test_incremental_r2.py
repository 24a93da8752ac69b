"""Incremental R² over a window, on known answers: a representation that is the exact belief
gives the full increment (R²(b) ~ 1, b - a = 1 - a); one that is a copy of the window gives
none (b - a exactly 0, interval [0, 0]); noise as the control adds nothing, so b - c is the
agent's increment; (a) is the baseline window's own fit; Holm's correction on a known family."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import (
    FitMemo,
    ProbeSettings,
    WindowRegressor,
    branch_ids,
    compare_with_windows,
    evaluate_probe,
    holm_adjust,
    incremental_r2,
    window_features,
)
from rl_harness.analysis.incremental import window_residual_readout
from rl_harness.analysis.probes import bootstrap_p_greater
from tests.analysis.test_window_baselines import controlled_process

FAST = WindowRegressor(hidden=(48, 48), epochs=25, batch_size=256, learning_rate=5e-3)


@pytest.fixture(scope="module")
def process():
    # Emissions of accuracy 0.7: the belief depends on tokens older than any short window.
    inputs, beliefs, history = controlled_process(0.7, 40, 64, 8, seed=11)
    noise = np.random.default_rng(3).normal(scale=0.02, size=beliefs.shape)
    agent = evaluate_probe(beliefs + noise, beliefs, ProbeSettings(seed=2, n_bootstrap=200))
    branches = {"tokens_2": branch_ids(inputs[..., :3], 2)}
    return inputs, beliefs, history, agent, branches


def _run(process, representation, control=None, ks=(1, 2)):
    inputs, beliefs, history, agent, branches = process
    return incremental_r2(
        agent,
        inputs,
        beliefs,
        representation=representation,
        control=control,
        ks=list(ks),
        history=history,
        branchings=branches,
        regressor=FAST,
    )


@pytest.fixture(scope="module")
def belief_table(process):
    beliefs = process[1]
    noise = np.random.default_rng(9).normal(size=(*beliefs.shape[:2], 4))
    return _run(process, beliefs, control=noise)


def test_the_exact_belief_gives_the_full_increment(belief_table):
    table = belief_table
    for row in table.rows:
        a, b = row.window.r2_pooled.value, row.agent.r2_pooled.value
        assert a < 0.97  # the short window misses older tokens
        assert b > 0.99  # the belief itself: all of it
        increment = row.agent_increment.r2_pooled
        assert increment.value == pytest.approx(b - a)
        assert increment.value == pytest.approx(1.0 - a, abs=0.01)
        assert increment.low > 0
        # Within branches of equal last 2 tokens too.
        within = row.agent_increment.within_branch["tokens_2"]
        assert within.low > 0
        assert row.agent.within_branch["tokens_2"].value > 0.95
        # Noise as the control: nothing beyond the window (a fit to noise costs a little held
        # out, the intervals hold the fits fixed), so b - c is about the agent's increment.
        assert -0.02 < row.control_increment.r2_pooled.value < 0.002
        assert row.agent_minus_control.r2_pooled.low > 0
        assert row.agent_residual_columns == 3
        # Every resample below 0 never: the smallest p a table of 200 resamples can give.
        assert row.p_values["agent_increment"]["global"] == pytest.approx(1 / 201)
        assert row.p_values["agent_minus_control"]["tokens_2"] == pytest.approx(1 / 201)
        assert row.p_values["agent_increment"]["tokens_2"] == pytest.approx(1 / 201)
    holm = table.holm()
    assert holm["agent_increment"]["global"] == [pytest.approx(2 / 201)] * 2
    record = table.to_dict()
    assert record["ks"] == [1, 2] and record["p_values_holm"] == holm
    assert set(record["rows"][0]) >= {"window", "agent", "control", "agent_minus_control"}


def test_a_copy_of_the_window_gives_no_increment(process):
    inputs, beliefs, history, agent, branches = process
    copy = window_features(inputs, 2, history)  # what a 2-window holds, nothing more
    table = _run(process, copy, ks=(1, 2))
    one, two = table.rows
    # k = 2: the copy is affine in the window: no residual column, (b) is (a) exactly.
    assert two.agent_residual_columns == 0
    assert two.agent_increment.r2_pooled.to_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert two.agent_increment.within_branch["tokens_2"].value == 0.0
    assert two.p_values["agent_increment"]["global"] == 1.0
    # k = 1: the copy holds the older step the 1-window lacks: an increment, and a real one.
    assert one.agent_residual_columns > 0
    assert one.agent_increment.r2_pooled.low > 0


def test_the_window_fit_is_the_baseline_window_of_the_same_k(process, belief_table):
    inputs, beliefs, history, agent, branches = process
    table = belief_table
    windows = compare_with_windows(
        agent, inputs, beliefs, ks=[1], history=history, branchings=branches, regressor=FAST
    )
    assert table.rows[0].window.to_dict() == windows.rows[0].window.to_dict()


def test_the_readout_is_fitted_on_train_episodes_only(process):
    inputs, beliefs, history, agent, _ = process
    window = window_features(inputs, 1, history)
    train = agent.train_episodes
    readout, kept = window_residual_readout(beliefs, window, beliefs, train=train)
    # Changing the held-out targets changes no read-out (train or test).
    scrambled = beliefs.copy()
    scrambled[agent.test_episodes] = scrambled[agent.test_episodes][:, ::-1]
    again, _ = window_residual_readout(beliefs, window, scrambled, train=train)
    np.testing.assert_array_equal(readout, again)
    assert kept == 3 and readout.shape == beliefs.shape
    with pytest.raises(ValueError, match="share"):
        window_residual_readout(beliefs[:, :5], window, beliefs, train=train)
    with pytest.raises(ValueError, match="at least n_folds train episodes"):
        window_residual_readout(beliefs, window, beliefs, train=train[:3])


def test_holm_and_the_bootstrap_p_value_on_known_families():
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5.
    assert holm_adjust([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm_adjust([None, 0.2, 0.9]) == [None, pytest.approx(0.4), pytest.approx(0.9)]
    assert holm_adjust([0.6, 0.7]) == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([1.5])
    assert bootstrap_p_greater(np.array([0.1, 0.2, -0.1, 0.0])) == pytest.approx(3 / 5)
    assert bootstrap_p_greater(np.array([np.nan])) is None


def test_a_memo_shared_with_the_windows_reads_a_and_changes_no_number(process, belief_table):
    # The analysis shares one FitMemo between the baseline windows and the incremental test
    # on the same data (issue 53 item 2): each k's window alone (a) is read, not trained
    # again, and the whole table is the one computed without the memo, bit for bit.
    inputs, beliefs, history, agent, branches = process
    noise = np.random.default_rng(9).normal(size=(*beliefs.shape[:2], 4))
    memo = FitMemo()
    windows = compare_with_windows(
        agent,
        inputs,
        beliefs,
        ks=[1, 2],
        history=history,
        branchings=branches,
        regressor=FAST,
        memo=memo,
    )
    assert len(memo) == 2 and memo.reads == 0
    shared = incremental_r2(
        agent,
        inputs,
        beliefs,
        representation=beliefs,
        control=noise,
        ks=[1, 2],
        history=history,
        branchings=branches,
        regressor=FAST,
        memo=memo,
    )
    assert memo.reads == 2  # (a) of k = 1 and 2; (b) and (c) trained
    assert len(memo) == 2 + 4
    assert shared.to_dict() == belief_table.to_dict()
    assert shared.rows[0].window.to_dict() == windows.rows[0].window.to_dict()
    # Another control changes (c) only: (a) and (b) are read from the memo, (c) is trained.
    other = incremental_r2(
        agent,
        inputs,
        beliefs,
        representation=beliefs,
        control=np.random.default_rng(10).normal(size=noise.shape),  # another noise
        ks=[1],
        history=history,
        branchings=branches,
        regressor=FAST,
        memo=memo,
    )
    assert memo.reads == 2 + 2
    assert other.rows[0].agent.to_dict() == belief_table.rows[0].agent.to_dict()
    assert other.rows[0].control.to_dict() != belief_table.rows[0].control.to_dict()


# Several controls (issue 52 follow-up: one untrained network is one draw). -----------------


@pytest.fixture(scope="module")
def several_table(process):
    # Control "same" IS the agent's representation; "noise" holds nothing beyond the window.
    beliefs = process[1]
    noise = np.random.default_rng(9).normal(size=(*beliefs.shape[:2], 4))
    return _run_several(process, beliefs, {"noise": noise, "same": beliefs})


def _run_several(process, representation, controls, ks=(1, 2)):
    inputs, beliefs, history, agent, branches = process
    return incremental_r2(
        agent,
        inputs,
        beliefs,
        representation=representation,
        controls=controls,
        ks=list(ks),
        history=history,
        branchings=branches,
        regressor=FAST,
    )


def test_a_control_that_is_the_agent_gives_zero_and_so_does_the_minimum(several_table):
    zero = {"value": 0.0, "low": 0.0, "high": 0.0}
    for row in several_table.rows:
        noise, same = row.controls
        assert (noise.name, same.name) == ("noise", "same")
        # The same read-out is the same fit: b - c exactly 0 on every resample, p = 1.
        assert same.agent_minus_control.r2_pooled.to_dict() == zero
        assert same.agent_minus_control.within_branch["tokens_2"].to_dict() == zero
        assert same.control.to_dict() == row.agent.to_dict()
        assert same.p_values == {"global": 1.0, "tokens_2": 1.0}
        # Against noise the agent gains on every resample, so the minimum over the two is
        # the zero of "same", exactly, on every resample; the mean is half of b - c(noise).
        assert noise.agent_minus_control.r2_pooled.low > 0
        assert row.min_over_controls.r2_pooled.to_dict() == zero
        assert row.min_over_controls.within_branch["tokens_2"].to_dict() == zero
        half = noise.agent_minus_control.r2_pooled.value / 2
        assert row.mean_over_controls.r2_pooled.value == pytest.approx(half)
        # No single (c) in a row with several.
        assert row.control is None and row.agent_minus_control is None
        assert set(row.p_values) == {"agent_increment"}
    # Holm over the whole k x controls family (4 tests per score): noise's p 1/201 -> 4/201
    # (the smallest of four), same's p 1 stays 1; the minimum's p is the largest: 1.
    holm = several_table.holm_controls()
    assert holm["global"]["noise"] == [pytest.approx(4 / 201), pytest.approx(4 / 201)]
    assert holm["global"]["same"] == [1.0, 1.0]
    assert several_table.min_over_controls_p() == {"global": [1.0, 1.0], "tokens_2": [1.0, 1.0]}
    record = several_table.to_dict()
    assert record["controls"] == ["noise", "same"]
    assert set(record["p_values_holm"]) == {"agent_increment"}
    assert record["p_values_min_over_controls"]["global"] == [1.0, 1.0]
    row = record["rows"][0]
    assert "control" not in row and set(row["controls"]) == {"noise", "same"}
    assert row["agent_minus_controls_min"]["r2_pooled"] == zero


def test_controls_that_copy_the_window_give_a(process):
    inputs, beliefs, history, agent, branches = process
    copy = window_features(inputs, 2, history)  # affine in the 2-window: nothing beyond it
    table = _run_several(process, beliefs, {"copy": copy, "scaled": 3.0 * copy - 1.0}, ks=(2,))
    (row,) = table.rows
    for control in row.controls:
        assert control.residual_columns == 0
        assert control.control.to_dict() == row.window.to_dict()  # c = a exactly
        assert control.control_increment.r2_pooled.to_dict() == {
            "value": 0.0,
            "low": 0.0,
            "high": 0.0,
        }
        # b - c is then the agent's increment b - a, resample for resample.
        assert control.agent_minus_control.to_dict() == row.agent_increment.to_dict()
    assert row.min_over_controls.to_dict() == row.agent_increment.to_dict()
    assert row.mean_over_controls.r2_pooled.value == pytest.approx(
        row.agent_increment.r2_pooled.value
    )


def test_one_control_reads_and_records_as_before(process, belief_table):
    # control=x is controls={"control": x}: the same record, bit for bit (old records and
    # their readers unchanged); a control in a table of several is that control's own fit.
    beliefs = process[1]
    noise = np.random.default_rng(9).normal(size=(*beliefs.shape[:2], 4))
    named = _run_several(process, beliefs, {"control": noise})
    assert named.to_dict() == belief_table.to_dict()
    assert "controls" not in named.to_dict()
    several = _run_several(process, beliefs, {"control": noise, "same": beliefs})
    for old, new in zip(belief_table.rows, several.rows, strict=True):
        first = new.controls[0]
        assert first.control.to_dict() == old.control.to_dict()
        assert first.agent_minus_control.to_dict() == old.agent_minus_control.to_dict()
        assert first.p_values == old.p_values["agent_minus_control"]
    inputs, _, _, agent, _ = process
    with pytest.raises(ValueError, match="control= or controls="):
        incremental_r2(
            agent, inputs, beliefs, representation=beliefs, control=noise, controls={}, ks=[1]
        )
    with pytest.raises(ValueError, match="named 'agent'"):
        _run_several(process, beliefs, {"agent": noise})
