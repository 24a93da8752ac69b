"""Is the incremental test's window converged? The test again with other window MLPs.

Why: the memory claim rests on b - a > 0 (incremental.py): the window's MLP on the last k
inputs with the agent's read-out added beats the same MLP without it. The window's MLP is a
capped fit (`WindowRegressor`: 128 x 128, 20 epochs, 960 Adam steps at the CPU budget's
sizes). Where it has not converged to what the last k inputs determine, the agent's read-out
(a function of the same inputs, fitted separately) can fill part of the gap, and b - a comes
out positive with no memory beyond k steps. Memory beyond the window survives a stronger
window; an under-fit window's gap shrinks: (a) rises and b - a falls toward 0.

What it runs: on the agent's *sampled* rollouts (incremental.KEY_SAMPLED: where the pooled
seeds show b - a > 0 at k = 2), collected again as the analysis collects them (the same
named streams: the same episodes), with one untrained init (init 0, the pooled reading's
control), the analysis' probe of the agent (its split and resamples), the test at k = KS for
each of REGRESSORS: the recorded MLP, half its epochs, half its width, 4x its epochs, 2x
its width. Each is the library's
`incremental_r2` with that regressor (its own Holm family over KS). The recorded regressor's
rows repeat the run's own record at the same k up to float rounding (the check that this is
the same test on the same data: `recorded_matches`).

On request only (it costs ~9x the incremental test): `rl-harness analyze LEAF RUN --stage
window_capacity`. Writes window_capacity.json: {schema_version, data, inputs, ks,
untrained_inits, regressors: [{name, regressor, table (IncrementalR2.to_dict())}] in
REGRESSORS' order,
recorded_matches: {k: max relative difference of R²(a), R²(b), R²(c) points against
probe_metrics.json's incremental_r2_sampled}, seconds: {stage: s, total}, torch_threads}.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import incremental
from rl_harness.analysis import Rollouts, WindowRegressor

SCHEMA_VERSION = 1
FILE = "window_capacity.json"
STAGE = "window_capacity"
KS = (1, 2, 3)
_RECORDED = WindowRegressor()
# Larger MLPs ask whether the recorded one has converged; smaller ones what a cheaper window
# (a faster analysis, issue 53 item 2) would cost in R²(a) and in the test's reading.
REGRESSORS = {
    "recorded": _RECORDED,
    "epochs_half": WindowRegressor(epochs=_RECORDED.epochs // 2),
    "width_half": WindowRegressor(hidden=tuple(h // 2 for h in _RECORDED.hidden)),
    "epochs_x4": WindowRegressor(epochs=4 * _RECORDED.epochs),
    "width_x2": WindowRegressor(hidden=tuple(2 * h for h in _RECORDED.hidden)),
}
PARTS = ("window", "agent", "control")  # R²(a), R²(b), R²(c)


def measure(
    rollouts: Rollouts,
    untrained_features: np.ndarray,
    *,
    layout: Any,
    plan: Any,
    seed: int,
    say: Any = print,
) -> dict[str, Any]:
    """The record (module docstring) on the agent's sampled `rollouts` with the untrained
    module's replayed features; the probe and branching as the analysis makes them."""
    agent, branchings = incremental.own_probe(rollouts, layout, plan, seed)
    regressors = []
    for name, regressor in REGRESSORS.items():
        say(f"window capacity: {name} ({regressor.hidden}, {regressor.epochs} epochs), k = {KS}")
        record = incremental.measure(
            rollouts,
            untrained_features,
            agent=agent,
            branchings=branchings,
            layout=layout,
            plan=plan,
            say=say,
            data=incremental.DATA_SAMPLED,
            ks=KS,
            regressor=regressor,
        )
        regressors.append({"name": name, "regressor": asdict(regressor), "table": record["table"]})
    return {
        "schema_version": SCHEMA_VERSION,
        "data": incremental.DATA_SAMPLED,
        "inputs": incremental.INPUTS,
        "ks": list(KS),
        "untrained_inits": 1,
        "regressors": regressors,
    }


def recorded_matches(
    record: Mapping[str, Any], sampled: Mapping[str, Any]
) -> dict[str, float | None]:
    """{k: the largest relative difference of the R²(a), (b), (c) points (global and within
    each branching) of `record`'s recorded regressor against the run's own
    incremental_r2_sampled record `sampled` at the same k}; None where the run's record has
    no such k, or where a point is missing on one side only (a mismatch no number states). A
    point missing on both sides (an empty branching) is skipped."""
    own = {row["k"]: row for row in sampled["table"]["rows"]}
    out: dict[str, float | None] = {}
    (recorded,) = (block for block in record["regressors"] if block["name"] == "recorded")
    for row in recorded["table"]["rows"]:
        theirs = own.get(row["k"])
        pairs = [] if theirs is None else list(_points(row, theirs))
        if any(np.isfinite(a) != np.isfinite(b) for a, b in pairs):
            out[str(row["k"])] = None
            continue
        both = [(a, b) for a, b in pairs if np.isfinite(a)]
        out[str(row["k"])] = max((abs(a - b) / max(abs(b), 1e-12) for a, b in both), default=None)
    return out


def _points(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> Iterator[tuple[float, float]]:
    """(mine, theirs) per R² point; a part the run's record lacks is skipped (a record of
    several untrained inits has no single (c): its (a) and (b) are still compared)."""
    for part in PARTS:
        a, b = mine.get(part), theirs.get(part)
        if not isinstance(a, Mapping) or not isinstance(b, Mapping):
            continue
        yield _value(a.get("r2_pooled")), _value(b.get("r2_pooled"))
        for name, estimate in (a.get("within_branch") or {}).items():
            yield _value(estimate), _value((b.get("within_branch") or {}).get(name))


def _value(estimate: Mapping[str, Any] | None) -> float:
    if not isinstance(estimate, Mapping) or estimate.get("value") is None:
        return float("nan")
    return float(estimate["value"])
