"""Fit an affine probe on training episodes and score it on held-out ones, with intervals.

Optional extras: within-branch R² (steps grouped by their last k visible tokens, see
`branches.py`), a permutation null of the global R² and a conditional one (targets shuffled
within branches) of the within-branch R² (see `permutation.py`). A target whose held-out values
never vary (variance at most `variance_tol` times its mean square) has no R²: it is reported
as None with the reason, and the pooled R² leaves it out and lists it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rl_harness.analysis.probes.affine import AffineProbe, fit_affine, ridge_solver
from rl_harness.analysis.probes.bootstrap import Estimate, bootstrap_weights, estimates
from rl_harness.analysis.probes.branches import branch_ids, branch_sums, within_scores
from rl_harness.analysis.probes.permutation import (
    PermutationNull,
    conditional_permutation_null,
    permutation_null,
)
from rl_harness.analysis.probes.scores import episode_sums, scores
from rl_harness.analysis.probes.settings import DEFAULT_STREAM, ProbeSettings, require_settings
from rl_harness.analysis.probes.split import split_episodes
from rl_harness.seeding import stream_rng


def _to_json(value: Any) -> Any:
    if isinstance(value, Estimate | PermutationNull | WithinBranchReport):
        return value.to_dict()
    if isinstance(value, dict):
        return {key: _to_json(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class WithinBranchReport:
    """R² among steps with equal last `k` visible tokens (k: the branch depth, see
    `branches.py`), held out.

    Scores are None when the targets do not vary within branches (`undefined` says why).
    """

    k: int
    r2_pooled: Estimate | None
    r2: dict[str, Estimate | None]
    undefined: dict[str, str]
    r2_pooled_excludes: list[str]
    within_variance: dict[str, float]  # mean within-branch variance per used step
    n_branches: int  # distinct branches among the held-out steps
    n_branches_used: int  # those with at least 2 steps
    n_steps_used: int
    permutation: PermutationNull | None = None  # conditional null (targets shuffled in branches)

    def to_dict(self) -> dict[str, Any]:
        return {name: _to_json(value) for name, value in self.__dict__.items()}


@dataclass(frozen=True)
class ProbeReport:
    """Held-out scores of one affine probe; intervals are bootstrap over test episodes.

    The probe is held fixed while test episodes are resampled, so an interval covers the
    evaluation's sampling noise, not the variability of the fit itself.
    """

    target_names: list[str]
    r2_pooled: Estimate | None  # None when no target varies
    r2: dict[str, Estimate | None]  # None: undefined (see `undefined`)
    # The errors below are None only when not finite (an overflow: the inputs are finite).
    rmse_pooled: Estimate | None
    rmse: dict[str, Estimate | None]
    mse_pooled: Estimate | None
    mse_train_mean_pooled: Estimate | None  # baseline: predict the train mean
    mse_best_constant_pooled: Estimate | None  # baseline: the best constant (the test mean)
    train_r2_pooled: float | None
    n_features: int
    n_train_episodes: int
    n_test_episodes: int
    n_train_samples: int
    n_test_samples: int
    ridge: float
    test_fraction: float
    n_bootstrap: int
    confidence: float
    seed: int
    stream: list[str] = field(default_factory=lambda: list(DEFAULT_STREAM))
    undefined: dict[str, str] = field(default_factory=dict)  # target -> why R² is undefined
    r2_pooled_excludes: list[str] = field(default_factory=list)
    within_branch: WithinBranchReport | None = None
    permutation: PermutationNull | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: Estimates as {value, low, high}, undefined scores as None."""
        return {name: _to_json(value) for name, value in self.__dict__.items()}


@dataclass(frozen=True)
class ProbeEvaluation:
    report: ProbeReport
    probe: AffineProbe
    train_episodes: np.ndarray  # indices into the episode axis
    test_episodes: np.ndarray
    test_predictions: np.ndarray  # (n_test_episodes, T, k)
    settings: ProbeSettings  # the protocol; baselines scored on this split reuse it
    # (n_bootstrap, n_test_episodes) episode counts of the intervals: pass them to
    # `paired_difference` to compare another predictor on the same resamples.
    bootstrap_weights: np.ndarray | None = None

    def scoring(self, branchings: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """`held_out_scores` / `paired_difference` keyword arguments that score any other
        predictor like this probe: its bootstrap resamples and confidence, the targets its
        pooled R² uses, and `branchings` {name: (E, T) labels} cut to its test episodes."""
        if self.bootstrap_weights is None:
            raise ValueError("the agent's ProbeEvaluation carries no bootstrap weights")
        excluded = set(self.report.r2_pooled_excludes)
        return {
            "weights": self.bootstrap_weights,
            "branchings": {
                name: np.asarray(labels)[self.test_episodes]
                for name, labels in (branchings or {}).items()
            },
            "confidence": self.settings.confidence,
            "include": np.array([name not in excluded for name in self.report.target_names]),
        }


def _finite_or_none(value: np.ndarray) -> float | None:
    return float(value) if np.isfinite(value) else None


def _never_varying(
    names: list[str], variance: np.ndarray, mean_square: np.ndarray, tol: float, why: str
) -> dict[str, str]:
    """Targets whose variance is numerically zero, with the reason their R² is undefined."""
    return {
        name: f"R² undefined: {why} (variance {var:.3g})"
        for name, var, square in zip(names, variance, mean_square, strict=True)
        if var <= tol * square
    }


def _episode_array(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 3 or min(array.shape) == 0:
        raise ValueError(f"{name} must be a non-empty (n_episodes, T, m) array, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def evaluate_probe(
    representations: np.ndarray,
    targets: np.ndarray,
    settings: ProbeSettings | None = None,
    *,
    target_names: Sequence[str] | None = None,
    branch_tokens: np.ndarray | None = None,
    **loose: object,
) -> ProbeEvaluation:
    """Probe (n_episodes, T, d) representations for (n_episodes, T, k) targets under
    `settings` (required: loose probe keywords such as `seed=` are refused, TypeError).

    With `branch_tokens` ((E, T) or (E, T, m) per-step codes: visible tokens, or tokens and
    binned actions side by side) and `settings.branch_depth`, also report within-branch R²
    over branches of the last `branch_depth` codes. With `n_permutations` > 0, also a
    permutation null of the pooled R²; with `n_within_permutations` > 0, a conditional null
    of the within-branch R² (`within_branch.permutation`). The split, the bootstrap and the
    permutations draw from the named streams `(*stream, "split")`, `(*stream,
    "bootstrap")`, `(*stream, "permutation")` and `(*stream, "within_permutation")` of
    `seed`.
    """
    settings = require_settings(settings, loose, "evaluate_probe")
    x = _episode_array("representations", representations)
    y = _episode_array("targets", targets)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(
            f"representations {x.shape} and targets {y.shape} differ in (n_episodes, T)"
        )
    k = y.shape[2]
    names = [f"target_{i}" for i in range(k)] if target_names is None else list(target_names)
    if len(names) != k:
        raise ValueError(f"{len(names)} target names for {k} targets")

    depth = settings.branch_depth
    if (branch_tokens is None) != (depth is None):
        raise ValueError("within-branch R² needs both branch_tokens and branch_depth")
    branches = None
    if branch_tokens is not None and depth is not None:  # both or neither, checked above
        branches = branch_ids(branch_tokens, depth)
    if branches is not None and branches.shape != x.shape[:2]:
        raise ValueError(f"branch_tokens cover {branches.shape}, representations {x.shape[:2]}")

    seed, stream, n_bootstrap = settings.seed, settings.stream, settings.n_bootstrap
    confidence, variance_tol = settings.confidence, settings.variance_tol
    train, test = split_episodes(
        x.shape[0], settings.test_fraction, stream_rng(seed, *stream, "split")
    )
    d, steps = x.shape[2], x.shape[1]
    # One factorization of the train representations for the fit and both nulls' refits.
    solver = ridge_solver(x[train].reshape(-1, d), settings.ridge)
    probe = fit_affine(
        x[train].reshape(-1, d), y[train].reshape(-1, k), settings.ridge, solver=solver
    )
    reference = y[train].reshape(-1, k).mean(axis=0)
    train_pred = probe.predict(x[train].reshape(-1, d)).reshape(len(train), steps, k)
    test_pred = probe.predict(x[test].reshape(-1, d)).reshape(len(test), steps, k)
    held_out = y[test].reshape(-1, k)
    undefined = _never_varying(
        names,
        held_out.var(axis=0),
        (held_out**2).mean(axis=0),
        variance_tol,
        "its held-out values never vary",
    )
    include = np.array([name not in undefined for name in names])
    train_scores = scores(episode_sums(y[train], train_pred, reference).total(), include)

    per_episode = episode_sums(y[test], test_pred, reference)
    point = scores(per_episode.total(), include)
    weights = bootstrap_weights(len(test), n_bootstrap, stream_rng(seed, *stream, "bootstrap"))
    weights = weights.astype(np.float64)
    boot = scores(per_episode.weighted(weights), include)

    def one(values: np.ndarray, samples: np.ndarray) -> Estimate | None:
        if not np.isfinite(values):
            return None
        return estimates(values, samples[:, None], confidence)[0]

    def per_target(
        values: np.ndarray, samples: np.ndarray, missing: dict[str, str] | None = None
    ) -> dict[str, Estimate | None]:
        out: dict[str, Estimate | None] = {}
        for index, name in enumerate(names):
            defined = name not in (missing or {}) and np.isfinite(values[index])
            column = samples[:, index : index + 1]
            out[name] = estimates(values[index], column, confidence)[0] if defined else None
        return out

    within = None
    if branches is not None and depth is not None:  # depth is set whenever branches are
        sums = branch_sums(y[test], test_pred, branches[test])
        total = within_scores(sums.total())
        mean_square = (held_out**2).mean(axis=0)
        missing = dict(undefined)
        missing.update(
            (name, reason)
            for name, reason in _never_varying(
                names,
                total.variance[0],
                mean_square,
                variance_tol,
                f"it never varies within branches of the last {depth} tokens",
            ).items()
            if name not in missing
        )
        keep = np.array([name not in missing for name in names])
        point_w = within_scores(sums.total(), keep)
        boot_w = within_scores(sums.weighted(weights), keep)
        within_null = None
        if settings.n_within_permutations and np.isfinite(point_w.r2_pooled[0]):
            within_null = conditional_permutation_null(
                x[train],
                y[train],
                x[test],
                y[test],
                branches[train],
                branches[test],
                ridge=settings.ridge,
                n_permutations=settings.n_within_permutations,
                rng=stream_rng(seed, *stream, "within_permutation"),
                include=keep,
                solver=solver,
            )
        within = WithinBranchReport(
            k=int(depth),
            r2_pooled=one(point_w.r2_pooled[0], boot_w.r2_pooled),
            r2=per_target(point_w.r2[0], boot_w.r2, missing),
            undefined=missing,
            r2_pooled_excludes=[name for name in names if name in missing],
            within_variance=dict(zip(names, map(float, total.variance[0]), strict=True)),
            n_branches=len(np.unique(branches[test])),
            n_branches_used=int(total.branches_used[0]),
            n_steps_used=int(total.steps_used[0]),
            permutation=within_null,
        )

    null = None
    if settings.n_permutations and np.isfinite(point.r2_pooled):
        null = permutation_null(
            x[train],
            y[train],
            x[test],
            y[test],
            observed=float(point.r2_pooled),
            ridge=settings.ridge,
            n_permutations=settings.n_permutations,
            rng=stream_rng(seed, *stream, "permutation"),
            include=include,
            solver=solver,
        )

    report = ProbeReport(
        target_names=names,
        r2_pooled=one(point.r2_pooled, boot.r2_pooled),
        r2=per_target(point.r2, boot.r2, undefined),
        rmse_pooled=one(point.rmse_pooled, boot.rmse_pooled),
        rmse=per_target(point.rmse, boot.rmse),
        mse_pooled=one(point.mse_pooled, boot.mse_pooled),
        mse_train_mean_pooled=one(point.mse_train_mean_pooled, boot.mse_train_mean_pooled),
        mse_best_constant_pooled=one(point.mse_best_constant_pooled, boot.mse_best_constant_pooled),
        train_r2_pooled=_finite_or_none(train_scores.r2_pooled),
        n_features=d,
        n_train_episodes=len(train),
        n_test_episodes=len(test),
        n_train_samples=len(train) * steps,
        n_test_samples=len(test) * steps,
        ridge=settings.ridge,
        test_fraction=float(settings.test_fraction),
        n_bootstrap=n_bootstrap,
        confidence=float(confidence),
        seed=int(seed),
        stream=list(stream),
        undefined=undefined,
        r2_pooled_excludes=[name for name in names if name in undefined],
        within_branch=within,
        permutation=null,
    )
    return ProbeEvaluation(report, probe, train, test, test_pred, settings, weights)
