"""Probe numbers pinned: reports of every NumPy probe entry point on fixed random inputs,
compared with the values stored in tests/analysis/data/probe_golden.json.

The stored values were computed before the probe code was consolidated (one ridge solver,
one within-branch R², one settings record: issue 41), with the loose keyword arguments the
experiments then passed; the same reports through `ProbeSettings`, the only way left since
the loose path was removed (issue 48 item 5), must give the same numbers. A change of
solver moves values by rounding only (measured: below 1e-13), so the tolerance is 1e-10,
loose enough for another BLAS and tight enough for any real change.
Regenerate (only after a deliberate change of the numbers):
`python tests/analysis/test_probe_golden.py --write`.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    evaluate_probe,
    fit_affine,
    memory_yardstick,
    permutation_null,
    random_feature_probe,
    within_branch_variance_fraction,
)
from rl_harness.analysis.layer_probes import probe_named
from rl_harness.analysis.probes import branch_ids

GOLDEN = Path(__file__).parent / "data" / "probe_golden.json"
TOLERANCE = 1e-10
# The protocol the golden values were computed with (then as loose keywords).
SETTINGS = ProbeSettings(
    seed=7,
    ridge=1e-3,
    test_fraction=0.25,
    n_bootstrap=40,
    branch_depth=2,
    n_permutations=15,
    n_within_permutations=15,
)
TARGET_NAMES = ["a", "b", "c"]


def inputs() -> dict[str, np.ndarray]:
    """24 episodes x 20 steps: 3-valued tokens, 6 features carrying part of 3 targets."""
    rng = np.random.default_rng(20261206)
    tokens = rng.integers(0, 3, size=(24, 20))
    onehot = np.eye(3)[tokens]
    memory = np.cumsum(onehot - 1 / 3, axis=1) / np.sqrt(np.arange(1, 21))[None, :, None]
    targets = np.concatenate([memory[..., :2], onehot[..., :1]], -1)
    targets = targets + rng.normal(scale=0.3, size=targets.shape)
    features = np.concatenate([memory, onehot, rng.normal(size=(24, 20, 1))], -1)
    features = features @ rng.normal(size=(7, 6)) + rng.normal(scale=0.2, size=(24, 20, 6))
    beliefs = np.exp(memory) / np.exp(memory).sum(-1, keepdims=True)  # on the simplex
    return {
        "tokens": tokens,
        "onehot": onehot,
        "targets": targets,
        "features": features,
        "beliefs": beliefs,
    }


def reports() -> dict[str, Any]:
    """Every entry point's record on `inputs()`, under `SETTINGS`."""
    data = inputs()
    x, y, onehot = data["features"], data["targets"], data["onehot"]
    agent = evaluate_probe(x, y, SETTINGS, target_names=TARGET_NAMES, branch_tokens=onehot)
    plain = evaluate_probe(
        x, y, ProbeSettings(seed=1, n_bootstrap=30, n_permutations=12)
    )  # ridge 0
    labels = {"tokens_2": branch_ids(onehot, 2)}
    named = probe_named(
        {"x": x, "x2": x**2}, y, SETTINGS, target_names=TARGET_NAMES, branch_tokens=onehot
    )
    yardstick = memory_yardstick(
        agent,
        {1: data["beliefs"], 2: np.sqrt(data["beliefs"])},
        y,
        branchings=labels,
        ridge=1e-6,
        branch_k=2,
    )
    (relu,) = random_feature_probe(
        onehot, y, agent, widths=[16], seed=3, branchings=labels, ridge=1e-3
    )
    null = permutation_null(
        x[:18],
        y[:18],
        x[18:],
        y[18:],
        observed=0.5,
        ridge=0.0,
        n_permutations=10,
        rng=np.random.default_rng(3),
    )
    return {
        "agent": agent.report.to_dict(),
        "agent_test_predictions": agent.test_predictions.ravel().tolist(),
        "plain": plain.report.to_dict(),
        "named": named.to_dict(),
        "yardstick": yardstick.to_dict(),
        "random_relu": relu.to_dict(),
        "global_null": null.to_dict(),
        "variance_fraction": within_branch_variance_fraction(y, labels["tokens_2"]),
    }


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` differs from `expected` beyond TOLERANCE (absolute, or relative)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.keys() != actual.keys():
            return [f"{path}: keys {sorted(expected)} != {sorted(actual)}"]
        return [
            d for key in expected for d in differences(expected[key], actual[key], f"{path}/{key}")
        ]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: length {len(expected)} != {len(actual)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(e, a, f"{path}[{i}]")
        ]
    if isinstance(expected, float) and isinstance(actual, int | float):
        if math.isnan(expected) and math.isnan(actual):
            return []
        if math.isclose(expected, actual, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
            return []
        return [f"{path}: {expected!r} != {actual!r}"]
    return [] if expected == actual else [f"{path}: {expected!r} != {actual!r}"]


def test_every_probe_entry_point_keeps_its_numbers():
    expected = json.loads(GOLDEN.read_text())
    actual = json.loads(json.dumps(reports()))
    assert differences(expected, actual) == []


def test_a_rank_deficient_fit_is_the_minimum_norm_one():
    # Beliefs on the simplex: the centred columns are exactly dependent. The solver drops
    # the numerically zero direction (before: scipy's gelsd kept it, weights ~1e13, test
    # predictions off by up to 9e-3, layer-norm outputs likewise at ridge 0).
    data = inputs()
    beliefs, y = data["beliefs"].reshape(-1, 3), data["targets"].reshape(-1, 3)
    full = fit_affine(beliefs, y)
    reduced = fit_affine(beliefs[:, :2], y)  # the same span, full rank
    assert np.abs(full.weights).max() < 10
    np.testing.assert_allclose(full.predict(beliefs), reduced.predict(beliefs[:, :2]), atol=1e-10)
    np.testing.assert_allclose(full.weights.sum(axis=0), 0.0, atol=1e-9)  # no null-space part


def test_baselines_on_the_agents_split_take_its_ridge_and_seed_unless_given():
    data = inputs()
    x, y, onehot = data["features"], data["targets"], data["onehot"]
    record = evaluate_probe(x, y, SETTINGS, target_names=TARGET_NAMES, branch_tokens=onehot)
    assert record.settings == SETTINGS
    labels = {"tokens_2": branch_ids(onehot, 2)}
    default = random_feature_probe(onehot, y, record, widths=[8], branchings=labels)
    given = random_feature_probe(
        onehot, y, record, widths=[8], seed=7, ridge=1e-3, branchings=labels
    )
    assert default[0].to_dict() == given[0].to_dict()


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"seed": 0, "branch_depth": 2}, "branch_tokens and branch_depth"),
        ({"seed": 0, "branch_depth": -1}, "branch_depth"),
        ({"seed": 0, "n_permutations": 1.5}, "n_permutations"),
        ({"seed": 0, "ridge": float("inf")}, "ridge"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_settings_are_named(fields, match):
    data = inputs()
    with pytest.raises(ValueError, match=match):
        evaluate_probe(data["features"], data["targets"], ProbeSettings(**fields))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(reports(), indent=1) + "\n")
    else:
        print(json.dumps(reports())[:2000])
