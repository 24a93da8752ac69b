"""Incremental R² over a window: does a representation carry the target beyond its last k inputs?

For each window length k, three held-out fits of one model class (the baseline windows' MLP,
`windows.WindowRegressor`), all on the agent probe's train episodes, scored on its test
episodes with its bootstrap resamples:

- (a) `window`: the last k per-step inputs (`window_features`; for an agent, exactly the
  inputs it read: e.g. the visible token and its previous executed action);
- (b) `agent`: the same window plus the agent's representation's read-out;
- (c) `control`: the same window plus the read-out of a control representation replayed on
  the same inputs (an untrained module of the same architecture).

Reported per k, globally and within each named branching: R²(a), R²(b), R²(c), the agent
increment (b - a), the control increment (c - a) and their difference (b - c), each a paired
episode bootstrap on the same resamples (intervals of differences are of the difference),
with one-sided bootstrap p-values of (b - a) > 0 and (b - c) > 0, Holm-corrected over the
family of k (per quantity and score).

Several controls (`controls={name: representation}`, e.g. untrained modules of several
initialisations: one random network is one draw, and an agent may beat an unlucky one): each
control j gets its own (c_j), c_j - a and b - c_j with its p-value, all on the same resamples.
The claim "the agent holds more than an untrained network of its architecture" is made against
every control at once: the statistic is min_j (b - c_j) (point and each resample the minimum
over the controls, so its interval is of the worst control on every resample), and its p-value
at k is the largest of the controls' p-values, each Holm-corrected over the whole family of
k x j (per score). Why: "b > c_j for every j" is an intersection-union claim, shown only where
each b - c_j > 0 is shown; the largest p over j is a valid p for it with no correction over j
(Berger 1982), and correcting over the whole k x j family anyway makes every per-control
reading in the table hold at the same level simultaneously, at the cost of a little power. The
mean over the controls' b - c_j (per resample) is reported beside it, without a p (it describes
an average initialisation; the claim rests on the minimum). One control is recorded exactly as
before (`control=` is `controls={"control": ...}`; the record has no per-control block).

The read-out (why not the raw representation): what the window cannot supply is what the
representation holds beyond any linear function of the window, so the representation is
first residualised on the window (least squares on the train episodes; columns whose residual
variance is numerically zero dropped), then read out affinely for the targets (ridge of the
agent probe, no bias, cross-fitted: each train episode's read-out comes from a fit on the
other folds, test episodes' from all train episodes), so the MLP never sees a feature fitted
on the very targets it is trained on. The read-out is the affine probe's information, as the
study's probe is affine. Known answers: a representation that is the exact target gives
R²(b) ~ 1 and b - a = 1 - a; one that is a copy of the window (any linear function of it)
leaves no residual, so (b) *is* (a) (same inputs, same initial weights and minibatches) and
b - a is exactly 0.

Randomness: the MLPs use the windows' named streams `(*stream, "k<k>", "init" | "batches")`
(the default stream is the baseline windows', so (a) equals `compare_with_windows`' fit of
the same k on the same inputs) and `(*stream, "k<k>", "<name>", "extra")` for the first-layer
weights of the read-out columns; (b) and (c) share (a)'s initial weights and minibatches.
Read-outs equal bit for bit share one fit (the first named: the agent, then the controls in
order): the same features would differ only by their extra columns' draws, so a control that
*is* the agent's representation gives b - c exactly 0, and one affine in the window gives (a).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.probes.affine import (
    RidgeSolver,
    block_ridge,
    fit_affine,
    ridge_solver,
    row_blocks,
)
from rl_harness.analysis.probes.bootstrap import Estimate, estimates
from rl_harness.analysis.probes.multiple import bootstrap_p_greater, holm_adjust
from rl_harness.analysis.probes.paired import HeldOutScores, r2_samples
from rl_harness.analysis.probes.windows import window_features
from rl_harness.analysis.windows import (
    DEFAULT_STREAM,
    FitMemo,
    FitTask,
    WindowRegressor,
    fit_predict_many,
)
from rl_harness.seeding import stream_seed

if TYPE_CHECKING:
    from rl_harness.analysis.probes.evaluate import ProbeEvaluation

Progress = Callable[[str], None]
N_FOLDS = 5  # cross-fitting folds of the train episodes for the read-out
RESIDUAL_TOL = 1e-9  # a residual column with variance <= tol * its column's variance is zero
GLOBAL = "global"  # the score name of the global R² in p-value tables
TESTED = ("agent_increment", "agent_minus_control")  # the quantities with p-values


def _scores(
    samples: Mapping[str | None, tuple[float, np.ndarray]], confidence: float, n: int
) -> HeldOutScores:
    def one(point: float, resampled: np.ndarray) -> Estimate | None:
        if not np.isfinite(point):
            return None
        return estimates(np.asarray([point]), resampled[:, None], confidence)[0]

    return HeldOutScores(
        r2_pooled=one(*samples[None]),
        within_branch={name: one(*value) for name, value in samples.items() if name is not None},
        n_bootstrap=n,
        confidence=float(confidence),
    )


def _minus(
    a: Mapping[str | None, tuple[float, np.ndarray]],
    b: Mapping[str | None, tuple[float, np.ndarray]],
) -> dict[str | None, tuple[float, np.ndarray]]:
    """A - B per score, point and resamples (the resamples are the same episodes)."""
    return {key: (a[key][0] - b[key][0], a[key][1] - b[key][1]) for key in a}


def _p_values(samples: Mapping[str | None, tuple[float, np.ndarray]]) -> dict[str, float | None]:
    return {
        GLOBAL if key is None else key: (
            bootstrap_p_greater(resampled) if np.isfinite(point) else None
        )
        for key, (point, resampled) in samples.items()
    }


def window_residual_readout(
    representation: np.ndarray,
    window: np.ndarray,
    targets: np.ndarray,
    *,
    train: np.ndarray,
    ridge: float = 0.0,
    n_folds: int = N_FOLDS,
    tol: float = RESIDUAL_TOL,
    window_solver: RidgeSolver | None = None,
) -> tuple[np.ndarray, int]:
    """((E, T, n) read-out, kept columns) of what `representation` (E, T, d) holds beyond any
    affine function of `window` (E, T, p), for `targets` (E, T, n); width 0 when nothing is
    left (the representation is affine in the window). Fits use the `train` episodes only;
    the train episodes' read-out is cross-fitted over `n_folds` interleaved folds.
    `window_solver`: `ridge_solver` of the train episodes' window at ridge 0, already made
    (the representations read against one window share it)."""
    rep = np.asarray(representation, dtype=np.float64)
    win = np.asarray(window, dtype=np.float64)
    y = np.asarray(targets, dtype=np.float64)
    episodes, steps = y.shape[:2]
    if rep.shape[:2] != (episodes, steps) or win.shape[:2] != (episodes, steps):
        raise ValueError(
            f"representation {rep.shape}, window {win.shape} and targets {y.shape} must share "
            "(n_episodes, T)"
        )
    train = np.asarray(train)
    if n_folds < 2 or len(train) < n_folds:
        raise ValueError(
            f"the read-out's cross-fitting needs n_folds >= 2 and at least n_folds train "
            f"episodes, got n_folds {n_folds} and {len(train)} train episodes"
        )

    def flat(values: np.ndarray) -> np.ndarray:
        return values.reshape(-1, values.shape[-1])

    affine = fit_affine(flat(win[train]), flat(rep[train]), solver=window_solver)
    residual = rep - affine.predict(flat(win)).reshape(rep.shape)
    variance = flat(rep[train]).var(axis=0)
    kept = flat(residual[train]).var(axis=0) > tol * np.maximum(variance, 1e-300)
    if not kept.any():
        return np.zeros((episodes, steps, 0)), 0
    residual = residual[..., kept]
    width = residual.shape[-1]

    # Every fit reads whole folds of the train episodes: each fold is factored once
    # (`row_blocks`) and each fit combines the factors of its folds (`block_ridge`).
    folds = np.arange(len(train)) % n_folds
    members = [train[folds == fold] for fold in range(n_folds)]
    blocks = row_blocks(
        residual.reshape(-1, width),
        y.reshape(-1, y.shape[-1]),
        [(fold_episodes[:, None] * steps + np.arange(steps)).ravel() for fold_episodes in members],
    )

    def readout(fit: Sequence[int], apply: np.ndarray) -> np.ndarray:
        x_mean, weights = block_ridge(blocks, fit, ridge)
        # No bias: a constant tells nothing.
        return np.asarray((residual[apply] - x_mean) @ weights, dtype=np.float64)

    out = np.zeros((episodes, steps, y.shape[-1]))
    test = np.setdiff1d(np.arange(episodes), train)
    if test.size:
        out[test] = readout(range(n_folds), test)
    for fold in range(n_folds):
        others = [other for other in range(n_folds) if other != fold]
        out[members[fold]] = readout(others, members[fold])
    return out, int(kept.sum())


@dataclass(frozen=True)
class IncrementalControl:
    """One control j of a row with several: (c_j), c_j - a and b - c_j, with b - c_j's p."""

    name: str
    control: HeldOutScores  # R²(c_j)
    control_increment: HeldOutScores  # c_j - a
    agent_minus_control: HeldOutScores  # b - c_j
    p_values: dict[str, float | None]  # {"global" | branching: one-sided bootstrap p of b - c_j}
    residual_columns: int  # the control's columns not affine in the window

    def to_dict(self) -> dict[str, Any]:
        return {
            "control": self.control.to_dict(),
            "control_increment": self.control_increment.to_dict(),
            "agent_minus_control": self.agent_minus_control.to_dict(),
            "p_values": self.p_values,
            "residual_columns": self.residual_columns,
        }


@dataclass(frozen=True)
class IncrementalRow:
    """One window length k: (a), (b), (c) and the paired differences, with p-values.

    One control: `control`, `control_increment`, `agent_minus_control` and its p-values in
    `p_values` (as ever). Several: those are None, each control is in `controls`, and
    `min_over_controls` / `mean_over_controls` are min_j / mean_j (b - c_j) per resample."""

    k: int
    window: HeldOutScores  # R²(a)
    agent: HeldOutScores  # R²(b)
    control: HeldOutScores | None  # R²(c)
    agent_increment: HeldOutScores  # b - a
    control_increment: HeldOutScores | None  # c - a
    agent_minus_control: HeldOutScores | None  # b - c
    # {quantity in TESTED: {"global" | branching: one-sided bootstrap p of quantity > 0}}
    p_values: dict[str, dict[str, float | None]]
    n_inputs: int  # window features
    agent_residual_columns: int  # representation columns not affine in the window
    control_residual_columns: int | None
    controls: tuple[IncrementalControl, ...] = ()  # several controls only, in order
    min_over_controls: HeldOutScores | None = None  # min_j (b - c_j)
    mean_over_controls: HeldOutScores | None = None  # mean_j (b - c_j)

    def to_dict(self) -> dict[str, Any]:
        def one(value: HeldOutScores | None) -> dict[str, Any] | None:
            return None if value is None else value.to_dict()

        common = {
            "k": self.k,
            "window": one(self.window),
            "agent": one(self.agent),
        }
        if self.controls:  # several: no single (c); each control's block and the summaries
            return common | {
                "agent_increment": one(self.agent_increment),
                "controls": {control.name: control.to_dict() for control in self.controls},
                "agent_minus_controls_min": one(self.min_over_controls),
                "agent_minus_controls_mean": one(self.mean_over_controls),
                "p_values": self.p_values,
                "n_inputs": self.n_inputs,
                "agent_residual_columns": self.agent_residual_columns,
            }
        return common | {
            "control": one(self.control),
            "agent_increment": one(self.agent_increment),
            "control_increment": one(self.control_increment),
            "agent_minus_control": one(self.agent_minus_control),
            "p_values": self.p_values,
            "n_inputs": self.n_inputs,
            "agent_residual_columns": self.agent_residual_columns,
            "control_residual_columns": self.control_residual_columns,
        }


@dataclass(frozen=True)
class IncrementalR2:
    """The incremental test over k = 1..K (see the module docstring)."""

    rows: list[IncrementalRow]
    regressor: WindowRegressor
    seed: int
    stream: list[str]
    ridge: float
    n_folds: int

    @property
    def control_names(self) -> list[str]:
        """The controls of a table with several, in order ([] for none or one)."""
        return [control.name for control in self.rows[0].controls] if self.rows else []

    def holm(self) -> dict[str, dict[str, list[float | None]]]:
        """{quantity: {score: Holm-adjusted p per row (k order)}}: each quantity and score is
        one family over the k of the table (with several controls: `agent_increment` only;
        their b - c_j are `holm_controls`)."""
        out: dict[str, dict[str, list[float | None]]] = {}
        for quantity in TESTED:
            if self.control_names and quantity != "agent_increment":
                continue
            names = {name for row in self.rows for name in row.p_values.get(quantity, {})}
            out[quantity] = {
                name: holm_adjust([row.p_values.get(quantity, {}).get(name) for row in self.rows])
                for name in sorted(names)
            }
        return out

    def holm_controls(self) -> dict[str, dict[str, list[float | None]]]:
        """{score: {control: Holm-adjusted p of b - c_j per row (k order)}}: per score, one
        family of every k and every control (K x J tests); {} without several controls."""
        names = self.control_names
        scores = sorted({s for row in self.rows for c in row.controls for s in c.p_values})
        out: dict[str, dict[str, list[float | None]]] = {}
        for score in scores:
            family = [c.p_values.get(score) for row in self.rows for c in row.controls]
            adjusted = holm_adjust(family)
            out[score] = {name: adjusted[j :: len(names)] for j, name in enumerate(names)}
        return out

    def min_over_controls_p(self) -> dict[str, list[float | None]]:
        """{score: per row (k order), the p of min_j (b - c_j) > 0: the largest of the
        controls' `holm_controls` p (None where any is undefined)}; {} without several."""
        out: dict[str, list[float | None]] = {}
        for score, by_control in self.holm_controls().items():
            per_k = zip(*by_control.values(), strict=True)
            out[score] = [
                None if any(p is None for p in ps) else max(p for p in ps if p is not None)
                for ps in per_k
            ]
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {
            "ks": [row.k for row in self.rows],
            "rows": [row.to_dict() for row in self.rows],
            "p_values_holm": self.holm(),
            "p_value": "one-sided bootstrap p of the quantity > 0: (1 + #{resamples <= 0}) / "
            "(1 + #resamples), over the held-out episodes with the fits held fixed; Holm over "
            "the k of the table, per quantity and score",
            "model": "the baseline windows' MLP on the last k inputs (a), plus the read-out of "
            "the agent's (b) or the control's (c) representation: the representation "
            "residualised on the window (least squares, train episodes), read out affinely for "
            "the targets (ridge, no bias, cross-fitted over the train episodes); (b) and (c) "
            "share (a)'s initial weights and minibatches",
            "regressor": asdict(self.regressor),
            "seed": self.seed,
            "stream": self.stream,
            "ridge": self.ridge,
            "n_folds": self.n_folds,
        }
        if not self.control_names:
            return out
        return out | {
            "controls": self.control_names,
            "p_values_holm_controls": self.holm_controls(),
            "p_values_min_over_controls": self.min_over_controls_p(),
            "p_value_controls": "b - c_j: the one-sided bootstrap p of each control, Holm over "
            "the whole family of k x controls per score (p_values_holm_controls); min_j "
            "(b - c_j) > 0 (the agent beats every control): the largest of its controls' Holm "
            "p at that k (p_values_min_over_controls); the mean over controls has no p",
        }


def incremental_r2(
    agent: ProbeEvaluation,
    inputs: np.ndarray,
    targets: np.ndarray,
    *,
    representation: np.ndarray,
    control: np.ndarray | None = None,
    controls: Mapping[str, np.ndarray] | None = None,
    ks: Sequence[int],
    history: np.ndarray | None = None,
    branchings: Mapping[str, np.ndarray] | None = None,
    regressor: WindowRegressor | None = None,
    seed: int | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
    n_folds: int = N_FOLDS,
    progress: Progress | None = None,
    memo: FitMemo | None = None,
) -> IncrementalR2:
    """The incremental test on the split and resamples of the agent's probe `agent`.

    `inputs` (E, T, m) are the per-step inputs the window reads (never the target: for an
    agent, the token and previous-action parts of what it observed), `history` (E, W, m) the
    steps before the first recorded one (a rollout's warm-up), `targets` (E, T, n) the
    probe's targets, `representation` (E, T, d) the agent's, `control` (E, T, d') the
    control's on the same inputs (None: no (c)), or `controls` {name: (E, T, d_j)} several
    (each its own (c_j), and min_j / mean_j (b - c_j): the module docstring; `control=x` is
    `controls={"control": x}`), `branchings` {name: (E, T) labels} the branches to score
    within. `seed` defaults to the probe's; its ridge is the read-out's.
    `memo` (`FitMemo`): fits made before are read, not trained again; the window alone (a)
    is `compare_with_windows`' fit of the same k on the same inputs, so a memo shared with
    the baseline windows saves one fit per k (bit for bit the same numbers).
    """
    common = agent.scoring(branchings)
    seed = agent.settings.seed if seed is None else int(seed)
    regressor = regressor or WindowRegressor()
    stream = tuple(stream)
    if control is not None and controls is not None:
        raise ValueError("incremental_r2 takes control= or controls=, not both")
    named = {"control": control} if control is not None else dict(controls or {})
    if {"agent", "window"} & set(named):
        raise ValueError(f"a control may not be named 'agent' or 'window', got {sorted(named)}")
    features = {"agent": representation} | named
    y = np.asarray(targets, dtype=np.float64)
    inputs = np.asarray(inputs, dtype=np.float64)
    train, test = agent.train_episodes, agent.test_episodes
    # Every fit of every k is set up first and all are trained together (fit_predict_many:
    # each model its own fit, to float rounding), then each row is scored from its fits.
    tasks: list[FitTask] = []
    plans = []
    for k in map(int, ks):
        window = window_features(inputs, k, history)
        where = (y, train, test, seed, stream, k)
        tasks.append(_fit_task(window, np.zeros((*y.shape[:2], 0)), *where, "window"))
        slots = {"window": len(tasks) - 1}
        columns: dict[str, int] = {}
        extras: dict[str, np.ndarray] = {}
        solver = ridge_solver(window[train].reshape(-1, window.shape[-1]))
        for name, values in features.items():
            extra, columns[name] = window_residual_readout(
                values,
                window,
                y,
                train=train,
                ridge=agent.settings.ridge,
                n_folds=n_folds,
                window_solver=solver,
            )
            same = next((n for n, e in extras.items() if np.array_equal(e, extra)), None)
            if columns[name] == 0:  # nothing beyond the window: (b) is (a) itself
                slots[name] = slots["window"]
            elif same is not None:  # the same read-out as one named before: the same fit
                slots[name] = slots[same]
            else:
                tasks.append(_fit_task(window, extra, *where, name))
                slots[name] = len(tasks) - 1
                extras[name] = extra
        plans.append((k, int(window.shape[-1]), columns, slots))
    if progress is not None:
        progress(
            f"incremental R²: {len(tasks)} window MLPs (k = {plans[0][0]}..{plans[-1][0]}, "
            "alone and with read-outs) trained together"
            + ("" if memo is None else " (those fitted before read from the memo)")
        )
    reads = 0 if memo is None else memo.reads
    fitted = [pred for _, pred in fit_predict_many(tasks, regressor, memo)]
    if progress is not None and memo is not None:
        progress(f"incremental R²: {memo.reads - reads} of {len(tasks)} fits read, not trained")
    held_shape = y[test].shape
    rows = []
    for k, n_inputs, columns, slots in plans:
        predictions = {name: fitted[index].reshape(held_shape) for name, index in slots.items()}
        rows.append(
            _row(k, n_inputs, y, predictions, columns, list(named), agent=agent, common=common)
        )
        if progress is not None:
            a, increment = rows[-1].window.r2_pooled, rows[-1].agent_increment.r2_pooled
            progress(
                f"incremental R² k={k}: window {'-' if a is None else f'{a.value:.4f}'}, agent "
                f"increment {'-' if increment is None else f'{increment.value:+.4f}'}"
            )
    ridge = float(agent.settings.ridge)
    return IncrementalR2(rows, regressor, seed, list(stream), ridge, int(n_folds))


def _fit_task(
    window: np.ndarray,
    extra: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    seed: int,
    stream: tuple[str, ...],
    k: int,
    name: str,
) -> FitTask:
    """The fit of window k plus `extra` columns (the read-out named `name`; none: (a)), on the
    windows' streams: (a)'s initial weights and minibatches, the extra columns' own draws."""
    x = np.concatenate([window, extra], axis=-1)
    return FitTask(
        x[train].reshape(-1, x.shape[-1]),
        y[train].reshape(-1, y.shape[-1]),
        x[test].reshape(-1, x.shape[-1]),
        stream_seed(seed, *stream, f"k{k}", "init"),
        stream_seed(seed, *stream, f"k{k}", "batches"),
        n_extra=extra.shape[-1],
        extra_seed=stream_seed(seed, *stream, f"k{k}", name, "extra"),
    )


def _row(
    k: int,
    n_inputs: int,
    y: np.ndarray,
    predictions: Mapping[str, np.ndarray],
    columns: Mapping[str, int],
    controls: Sequence[str],
    *,
    agent: ProbeEvaluation,
    common: Mapping[str, Any],
) -> IncrementalRow:
    """One k of `incremental_r2`: the scores of its fits' held-out `predictions` {window,
    agent, each of `controls`}."""
    weights, include = common["weights"], common["include"]
    within, confidence = common["branchings"], common["confidence"]
    held_out = y[agent.test_episodes]
    n = int(np.asarray(weights).shape[0])

    def sampled(pred: np.ndarray) -> dict[str | None, tuple[float, np.ndarray]]:
        return r2_samples(held_out, pred, weights=weights, branchings=within, include=include)

    def scores(values: Mapping[str | None, tuple[float, np.ndarray]]) -> HeldOutScores:
        return _scores(values, confidence, n)

    samples = {name: sampled(pred) for name, pred in predictions.items()}
    samples["agent_increment"] = _minus(samples["agent"], samples["window"])
    increment = scores(samples["agent_increment"])
    if len(controls) != 1:  # none, or several (each in its own block)
        several = [_control(name, samples, scores, columns[name]) for name in controls]
        minus = [_minus(samples["agent"], samples[name]) for name in controls]
        return IncrementalRow(
            k=k,
            window=scores(samples["window"]),
            agent=scores(samples["agent"]),
            control=None,
            agent_increment=increment,
            control_increment=None,
            agent_minus_control=None,
            p_values={"agent_increment": _p_values(samples["agent_increment"])},
            n_inputs=n_inputs,
            agent_residual_columns=columns["agent"],
            control_residual_columns=None,
            controls=tuple(several),
            min_over_controls=scores(_over(minus, np.min)) if minus else None,
            mean_over_controls=scores(_over(minus, np.mean)) if minus else None,
        )
    (single,) = controls
    one = _control(single, samples, scores, columns[single])
    agent_minus_control = _minus(samples["agent"], samples[single])
    return IncrementalRow(
        k=k,
        window=scores(samples["window"]),
        agent=scores(samples["agent"]),
        control=one.control,
        agent_increment=increment,
        control_increment=one.control_increment,
        agent_minus_control=one.agent_minus_control,
        p_values={
            "agent_increment": _p_values(samples["agent_increment"]),
            "agent_minus_control": _p_values(agent_minus_control),
        },
        n_inputs=n_inputs,
        agent_residual_columns=columns["agent"],
        control_residual_columns=columns[single],
    )


def _control(
    name: str,
    samples: Mapping[str, Mapping[str | None, tuple[float, np.ndarray]]],
    scores: Callable[[Mapping[str | None, tuple[float, np.ndarray]]], HeldOutScores],
    residual_columns: int,
) -> IncrementalControl:
    """Control `name`'s (c), c - a and b - c (its p-values of b - c > 0), from `samples`."""
    minus = _minus(samples["agent"], samples[name])
    return IncrementalControl(
        name=name,
        control=scores(samples[name]),
        control_increment=scores(_minus(samples[name], samples["window"])),
        agent_minus_control=scores(minus),
        p_values=_p_values(minus),
        residual_columns=residual_columns,
    )


def _over(
    values: Sequence[Mapping[str | None, tuple[float, np.ndarray]]],
    reduce: Callable[..., Any],
) -> dict[str | None, tuple[float, np.ndarray]]:
    """min / mean (`reduce`) over the controls of each score's point and of each resample
    (the same resamples): the statistic's own bootstrap distribution."""
    return {
        key: (
            float(reduce([value[key][0] for value in values])),
            np.asarray(reduce(np.stack([value[key][1] for value in values]), axis=0)),
        )
        for key in values[0]
    }
