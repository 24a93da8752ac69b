"""When the target appears: probe a sequence of checkpoints on the same recorded rollouts.

`probe_checkpoints([(env_steps, checkpoint), ...], rollouts, ...)` loads each checkpoint's
module (`load_module`, module only), replays the *same* recorded rollouts through it
(usually the final agent's: `replay.replay_rollouts`, warm-up included) and fits the same
probe (same split, same resamples, same branches), so the R² over training changes only with
the weights. `run_checkpoints(run)` lists a run's checkpoints with their env steps.
`plot_probe_over_training` draws R² (global and within branches) against env steps on a
log axis (step 0, a checkpoint before training, sits on the axis's linear part).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_harness.analysis.probes.bootstrap import Estimate
from rl_harness.analysis.probes.evaluate import ProbeReport, evaluate_probe
from rl_harness.analysis.probes.settings import ProbeSettings, require_settings
from rl_harness.analysis.replay import Preprocess, replay_rollouts
from rl_harness.analysis.rollouts import RepresentationExtractor, Rollouts, encode_representation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointProbe:
    """The probe of one checkpoint's representation on the shared rollouts: the two R²
    values, and the whole `ProbeReport` (`report`) with what a study reads beside them:
    `mse` (held-out, pooled), `target_variance` (the best constant's MSE: the held-out
    targets' variance), `branch_baseline_mse` (predicting each branch's mean: the mean
    within-branch variance, None without branches)."""

    env_steps: int
    checkpoint: str
    r2_pooled: Estimate | None
    within_branch_r2_pooled: Estimate | None
    report: ProbeReport | None = None

    @property
    def mse(self) -> float | None:
        estimate = None if self.report is None else self.report.mse_pooled
        return None if estimate is None else estimate.value

    @property
    def target_variance(self) -> float | None:
        estimate = None if self.report is None else self.report.mse_best_constant_pooled
        return None if estimate is None else estimate.value

    @property
    def branch_baseline_mse(self) -> float | None:
        within = None if self.report is None else self.report.within_branch
        if within is None or not within.within_variance:
            return None
        return float(np.mean(list(within.within_variance.values())))

    def to_dict(self) -> dict[str, Any]:
        def one(value: Estimate | None) -> dict[str, float] | None:
            return None if value is None else value.to_dict()

        return {
            "env_steps": self.env_steps,
            "checkpoint": self.checkpoint,
            "r2_pooled": one(self.r2_pooled),
            "within_branch_r2_pooled": one(self.within_branch_r2_pooled),
            "mse": self.mse,
            "target_variance": self.target_variance,
            "branch_baseline_mse": self.branch_baseline_mse,
            "report": None if self.report is None else self.report.to_dict(),
        }


def log_checkpoint_probe(
    probe: CheckpointProbe,
    index: int,
    total: int,
    seconds: float,
    progress: Callable[[str], None] | None = None,
) -> None:
    """One progress line per probed checkpoint, to the `rl_harness` logger (the CLI shows
    it) and to `progress` when given: a long analysis is never silent."""
    r2, within = probe.r2_pooled, probe.within_branch_r2_pooled
    line = (
        f"checkpoint {index}/{total} at {probe.env_steps:,} env steps: R² "
        f"{'undefined' if r2 is None else f'{r2.value:.4f}'}"
        + ("" if within is None else f", within-branch {within.value:.4f}")
        + f" ({seconds:.1f} s)"
    )
    logger.info(line)
    if progress is not None:
        progress(line)


def probe_checkpoints(
    checkpoints: Sequence[tuple[int, Path | str]],
    rollouts: Rollouts,
    settings: ProbeSettings | None = None,
    *,
    representation: RepresentationExtractor = encode_representation,
    preprocess: Preprocess | None = None,
    targets: np.ndarray | None = None,
    target_names: Sequence[str] | None = None,
    branch_tokens: np.ndarray | None = None,
    module_id: str | None = None,
    progress: Callable[[str], None] | None = None,
    steps_per_call: int = 1,
    **loose: object,
) -> list[CheckpointProbe]:
    """For each (env_steps, checkpoint) (sorted by env steps): load its module, replay
    `rollouts` through it (`steps_per_call` as in `replay_observations`) and probe the
    representation for `targets` (default `rollouts.targets`) with `evaluate_probe` under
    `settings` (a `ProbeSettings`, required); one settings record gives every checkpoint
    the same split and resamples. Each checkpoint logs one progress line
    (`log_checkpoint_probe`; also to `progress`)."""
    from rl_harness.analysis.checkpoints import DEFAULT_MODULE_ID, load_module

    settings = require_settings(settings, loose, "probe_checkpoints")
    y = rollouts.targets if targets is None else targets
    out = []
    ordered = sorted(checkpoints, key=lambda pair: pair[0])
    for index, (steps, checkpoint) in enumerate(ordered, start=1):
        began = time.perf_counter()
        module = load_module(Path(checkpoint), module_id or DEFAULT_MODULE_ID)
        features = replay_rollouts(
            module,
            rollouts,
            representation=representation,
            preprocess=preprocess,
            steps_per_call=steps_per_call,
        )
        report = evaluate_probe(
            features, y, settings, target_names=target_names, branch_tokens=branch_tokens
        ).report
        within = report.within_branch
        out.append(
            CheckpointProbe(
                env_steps=int(steps),
                checkpoint=str(checkpoint),
                r2_pooled=report.r2_pooled,
                within_branch_r2_pooled=None if within is None else within.r2_pooled,
                report=report,
            )
        )
        log_checkpoint_probe(out[-1], index, len(ordered), time.perf_counter() - began, progress)
    return out


def plot_probe_over_training(
    path: Path,
    probes: Sequence[CheckpointProbe],
    *,
    title: str,
    references: Mapping[str, float] | None = None,
) -> dict[str, list[float | None]]:
    """A PNG of R² (global, within branches; bootstrap intervals as bands) against env
    steps, log x axis (symlog: linear below the first non-zero step, so step 0 shows), with
    optional horizontal reference lines {label: R²}. Returns the plotted series
    {"env_steps", "r2_pooled", "within_branch_r2_pooled"} for callers to check."""
    # A Figure pyplot does not track: no backend switch (a notebook keeps inline plots).
    from matplotlib.figure import Figure

    steps = np.asarray([p.env_steps for p in probes], dtype=np.float64)
    series: dict[str, list[float | None]] = {"env_steps": [float(step) for step in steps]}
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    for index, (key, label) in enumerate(
        (("r2_pooled", "global R²"), ("within_branch_r2_pooled", "within-branch R²"))
    ):
        values = [getattr(p, key) for p in probes]
        series[key] = [None if v is None else v.value for v in values]
        shown = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
        if not shown:
            continue
        x = np.asarray([s for s, _ in shown])
        mid = np.asarray([v.value for _, v in shown])
        low = np.asarray([v.low for _, v in shown])
        high = np.asarray([v.high for _, v in shown])
        ax.plot(x, mid, marker="o", ms=3, lw=1.2, color=f"C{index}", label=label)
        ax.fill_between(x, low, high, color=f"C{index}", alpha=0.2, lw=0)
    for index, (label, value) in enumerate((references or {}).items()):
        ax.axhline(value, ls="--", lw=1, color=f"C{index + 2}", label=label)
    positive = steps[steps > 0]
    ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0)
    ax.set_xlabel("env steps (log)")
    ax.set_ylabel("held-out probe R²")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return series
