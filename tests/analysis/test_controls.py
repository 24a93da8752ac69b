"""The library's controls and read-outs (issue 50 item 1) on known answers: branchings that
count what the actions added, one call that scores an agent against its control, the raw
observation and windows on the agent probe's own resamples (tokens-only windows never read an
action; the incremental test's window is the window baseline), and policy read-outs against a
reference policy whose agreement and fractions are known by construction."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    Rollouts,
    WindowRegressor,
    evaluate_probe,
    quantile_bins,
)
from rl_harness.analysis.controls import action_branching, policy_readouts, score_controls
from tests.analysis.test_window_baselines import controlled_process

SETTINGS = ProbeSettings(seed=3, n_bootstrap=100, branch_depth=2)
SMALL = WindowRegressor(hidden=(16,), epochs=4, batch_size=256)
TOKENS, ACTIONS = slice(0, 3), slice(3, 5)


def test_quantile_bins_split_a_known_sample_into_the_stated_counts():
    # Nine distinct values: three bins of three.
    distinct = np.arange(9.0).reshape(1, 9, 1)
    assert np.bincount(quantile_bins(distinct, 3).ravel()).tolist() == [3, 3, 3]
    # 70 of 100 at the lower clip bound, 30 spread above it. Cutting at quantile edges put
    # everything in one bin (both edges on the bound); by mid-rank the bound (rank 0.35) is
    # bin 1 and the rest bin 2: two bins, 70 and 30.
    saturated = np.r_[np.zeros(70), np.linspace(0.1, 1.0, 30)].reshape(1, 100, 1)
    codes = quantile_bins(saturated, 3)
    assert np.bincount(codes.ravel(), minlength=3).tolist() == [0, 70, 30]
    edges = np.quantile(saturated.ravel(), [1 / 3, 2 / 3])
    old = np.searchsorted(edges, saturated.ravel(), side="right")
    assert np.unique(old).size == 1  # the old cut: split nothing
    # The same at the upper bound: 30 below (bin 0), 70 at the bound (mid-rank 0.65: bin 1).
    upper = 1.0 - saturated
    assert np.bincount(quantile_bins(upper, 3).ravel(), minlength=3).tolist() == [30, 70, 0]
    # Edges from the fit sample only: values outside its range go to the end bins.
    fit = np.arange(6.0).reshape(1, 6, 1)
    probe = np.array([-10.0, 0.0, 2.5, 5.0, 10.0]).reshape(1, 5, 1)
    assert quantile_bins(probe, 3, fit=fit).ravel().tolist() == [0, 0, 1, 2, 2]
    # A constant coordinate is one bin.
    assert np.unique(quantile_bins(np.ones((2, 5, 1)), 3)).tolist() == [1]


def test_action_branching_counts_what_the_actions_added():
    # 2 episodes x 6 steps, tokens cycle 0,1,2; the action alternates between two values.
    tokens = np.zeros((2, 6, 3))
    for t in range(6):
        tokens[:, t, t % 3] = 1.0
    actions = np.zeros((2, 6, 2))
    actions[:, 1::2, 0] = 1.0  # coordinate 0 alternates, coordinate 1 constant
    branching = action_branching(tokens, actions, np.array([0]), np.array([1]), k=2)
    record = branching.record
    # Token branches: step 0 (one token seen) and the pairs (0,1), (1,2), (2,0): 4.
    assert record["n_branches"] == {"tokens_2": 4, "tokens_actions_2": 6}
    assert record["branches_added_by_actions"] == 2
    assert record["bins_used_per_coordinate"] == [2, 1]
    held_out = record["held_out"]
    assert held_out["n_steps"] == 6 and held_out["min_members"] == 2
    # In the held-out episode tokens_2 has (1,2) and (2,0) twice each: 4 steps in 2 branches.
    assert held_out["tokens_2"]["steps_in_branches_with_min_members"] == 4
    assert held_out["tokens_2"]["branches_with_min_members"] == 2


def _rollouts(inputs, beliefs, history, representations, seed=0):
    episodes, steps = beliefs.shape[:2]
    return Rollouts(
        observations=inputs,
        representations=representations,
        targets=beliefs,
        actions=inputs[..., ACTIONS],
        rewards=np.random.default_rng(seed).random((episodes, steps)),
        episode_ids=np.arange(episodes),
        episode_seeds=np.arange(episodes),
        warmup_observations=history,
    )


@pytest.fixture(scope="module")
def process():
    inputs, beliefs, history = controlled_process(0.7, 24, 48, 6, seed=5)
    rng = np.random.default_rng(2)
    agent = beliefs + rng.normal(scale=0.02, size=beliefs.shape)
    control = rng.normal(size=(*beliefs.shape[:2], 4))
    return inputs, beliefs, history, agent, control


def test_score_controls_pairs_every_control_on_the_agent_probes_resamples(process):
    inputs, beliefs, history, agent, control = process
    rollouts = _rollouts(inputs, beliefs, history, agent)
    scored = score_controls(
        rollouts,
        control,
        settings=SETTINGS,
        tokens=TOKENS,
        actions=ACTIONS,
        ks=[1, 2],
        incremental=True,
        regressor=SMALL,
    )
    record = scored.to_dict()
    scores, differences = record["scores"], record["differences"]
    assert scores["agent"]["r2_pooled"]["value"] == pytest.approx(
        scored.agent.report.r2_pooled.value
    )
    assert scores["agent"]["r2_pooled"]["value"] > 0.98  # the belief plus a little noise
    assert scores["untrained_module"]["r2_pooled"]["value"] < 0.1  # noise explains nothing
    difference = differences["agent_minus_untrained_module"]["r2_pooled"]
    assert difference["value"] == pytest.approx(
        scores["agent"]["r2_pooled"]["value"] - scores["untrained_module"]["r2_pooled"]["value"]
    )
    assert difference["low"] > 0.8
    assert record["n_episodes"] == 24 and record["warmup_steps"] == 6
    assert set(record["action_branching"]["n_branches"]) == {"tokens_2", "tokens_actions_2"}
    # The windows read 3 token + 2 action columns (+ a flag) per lag; tokens only: 3 (+ 1).
    assert [row["n_inputs"] for row in record["windows"]["windows"]] == [6, 12]
    assert [row["n_inputs"] for row in record["tokens_only_windows"]["windows"]] == [4, 8]
    best = record["windows"]["windows"][record["best_window_k"] - 1]
    assert differences["agent_minus_best_window"] == best["agent_minus_window"]
    # The incremental test's window (a) is the window baseline of the same k.
    for row, window in zip(
        record["incremental_r2"]["rows"], record["windows"]["windows"], strict=True
    ):
        assert row["window"] == window["window"]

    # Scramble every action: the tokens-only windows' fits do not move, the others do.
    rng = np.random.default_rng(7)
    scrambled_inputs, scrambled_history = inputs.copy(), history.copy()
    scrambled_inputs[..., ACTIONS] = rng.uniform(-2, 2, size=inputs[..., ACTIONS].shape)
    scrambled_history[..., ACTIONS] = rng.uniform(-2, 2, size=history[..., ACTIONS].shape)
    again = score_controls(
        _rollouts(scrambled_inputs, beliefs, scrambled_history, agent),
        control,
        settings=SETTINGS,
        tokens=TOKENS,
        actions=ACTIONS,
        ks=[1, 2],
        regressor=SMALL,
    ).to_dict()
    for before, after in zip(
        record["tokens_only_windows"]["windows"],
        again["tokens_only_windows"]["windows"],
        strict=True,
    ):
        assert after["window"]["r2_pooled"] == before["window"]["r2_pooled"]
        assert (
            after["window"]["within_branch"]["tokens_2"]
            == (before["window"]["within_branch"]["tokens_2"])
        )
    assert again["windows"]["windows"][0]["window"] != record["windows"]["windows"][0]["window"]
    assert "incremental_r2" not in again
    with pytest.raises(ValueError, match="branch_depth"):
        score_controls(
            rollouts,
            control,
            settings=ProbeSettings(seed=1),
            tokens=TOKENS,
            actions=ACTIONS,
            ks=[1],
        )


def test_score_controls_reads_a_given_agent_probe_instead_of_fitting_it(process):
    """The in-run analysis scores its controls once, reading the agent probe it evaluated with
    its permutation nulls: every number is what fitting the probe here gives, the nulls kept;
    a probe evaluated under other settings is refused."""
    inputs, beliefs, history, agent, control = process
    rollouts = _rollouts(inputs, beliefs, history, agent)
    kwargs = dict(tokens=TOKENS, actions=ACTIONS, ks=[1], tokens_only=False, regressor=SMALL)
    fitted = score_controls(rollouts, control, settings=SETTINGS, **kwargs).to_dict()
    with_nulls = dataclasses.replace(SETTINGS, n_permutations=5, n_within_permutations=5)
    probe = evaluate_probe(agent, beliefs, with_nulls, branch_tokens=inputs[..., TOKENS])
    given = score_controls(rollouts, control, settings=SETTINGS, agent=probe, **kwargs).to_dict()

    def same(a, b):  # as JSON text: NaN leaves compare equal
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    assert same(given["agent_probe"], probe.report.to_dict())
    assert given["agent_probe"]["permutation"]["n_permutations"] == 5
    given["agent_probe"]["permutation"] = None
    given["agent_probe"]["within_branch"]["permutation"] = None
    assert same(given, fitted)
    other = evaluate_probe(
        agent, beliefs, dataclasses.replace(SETTINGS, seed=4), branch_tokens=inputs[..., TOKENS]
    )
    with pytest.raises(ValueError, match="not the controls'"):
        score_controls(rollouts, control, settings=SETTINGS, agent=other, **kwargs)


def test_policy_readouts_against_a_reference_of_known_agreement():
    rng = np.random.default_rng(0)
    beliefs = rng.dirichlet(np.ones(3), size=(4, 50))
    reference = beliefs.argmax(-1)
    # The agent follows the reference on even steps and plays (reference + 1) mod 3 on odd.
    agent = reference.copy()
    agent[:, 1::2] = (agent[:, 1::2] + 1) % 3
    states = rng.integers(0, 3, size=(4, 50))
    greedy = SimpleNamespace(targets=beliefs, actions=agent)
    sampled = SimpleNamespace(targets=beliefs, actions=reference.astype(np.float32))
    out = policy_readouts(
        {"greedy": greedy, "sampled": sampled},
        lambda b: b.argmax(-1),
        n_actions=3,
        hidden_states={"greedy": states},
        reference_value={"value": 0.7, "standard_error": 0.01},
    )
    assert out["greedy"]["agreement"] == 0.5 and out["sampled"]["agreement"] == 1.0
    assert out["reference_value"] == {"value": 0.7, "standard_error": 0.01}
    # By belief argmax the reference plays the argmax: one-hot fractions; the agent half/half.
    for group, block in out["greedy"]["reference_by_belief_argmax"].items():
        assert block["fractions"] == [float(int(group) == a) for a in range(3)]
    group0 = out["greedy"]["by_belief_argmax"]["0"]
    n0 = reference == 0
    assert group0["n_steps"] == int(n0.sum())
    assert group0["fractions"][0] == pytest.approx((n0[:, ::2]).sum() / n0.sum())
    assert group0["fractions"][1] == pytest.approx((n0[:, 1::2]).sum() / n0.sum())
    assert sum(out["greedy"]["fractions"]) == pytest.approx(1.0)
    by_state = out["greedy"]["by_hidden_state"]
    assert sum(block["n_steps"] for block in by_state.values()) == 200
    assert "by_hidden_state" not in out["sampled"]
    with pytest.raises(ValueError, match="Discrete actions 0..2"):
        policy_readouts(
            {"x": SimpleNamespace(targets=beliefs, actions=agent + 0.5)},
            lambda b: b.argmax(-1),
            n_actions=3,
        )
