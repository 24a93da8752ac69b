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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_harness.analysis.probes.bootstrap import Estimate
from rl_harness.analysis.probes.evaluate import evaluate_probe
from rl_harness.analysis.probes.settings import ProbeSettings, probe_settings
from rl_harness.analysis.replay import Preprocess, replay_rollouts
from rl_harness.analysis.rollouts import RepresentationExtractor, Rollouts, encode_representation


@dataclass(frozen=True)
class CheckpointProbe:
    """The probe of one checkpoint's representation on the shared rollouts."""

    env_steps: int
    checkpoint: str
    r2_pooled: Estimate | None
    within_branch_r2_pooled: Estimate | None

    def to_dict(self) -> dict[str, Any]:
        def one(value: Estimate | None) -> dict[str, float] | None:
            return None if value is None else value.to_dict()

        return {
            "env_steps": self.env_steps,
            "checkpoint": self.checkpoint,
            "r2_pooled": one(self.r2_pooled),
            "within_branch_r2_pooled": one(self.within_branch_r2_pooled),
        }


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
    **options: Any,
) -> list[CheckpointProbe]:
    """For each (env_steps, checkpoint) (sorted by env steps): load its module, replay
    `rollouts` through it (`steps_per_call` as in `replay_observations`) and probe the
    representation for `targets` (default `rollouts.targets`) with `evaluate_probe` under
    `settings` (or keyword `options`: `seed=`, `ridge=`, `branch_k=`, ...); one settings
    record gives every checkpoint the same split and resamples."""
    from rl_harness.analysis.checkpoints import DEFAULT_MODULE_ID, load_module

    settings = probe_settings(settings, options)
    y = rollouts.targets if targets is None else targets
    out = []
    for steps, checkpoint in sorted(checkpoints, key=lambda pair: pair[0]):
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
            )
        )
        if progress is not None:
            r2 = report.r2_pooled
            progress(
                f"checkpoint at {int(steps):,} env steps: R² "
                f"{'undefined' if r2 is None else f'{r2.value:.4f}'}"
            )
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
    series: dict[str, list[float | None]] = {"env_steps": steps.tolist()}
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
