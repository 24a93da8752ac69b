"""The figure of an `InterventionReport`: the policy's action shift against the optimal one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rl_harness.analysis.interventions.report import BELIEF, RANDOM, InterventionReport


def plot_action_shifts(
    path: Path,
    report: InterventionReport,
    *,
    title: str,
    layers: Sequence[str] | None = None,
    max_points: int = 3000,
) -> dict[str, int]:
    """A PNG with a row per layer (default: all of the report's) and a column per
    counterfactual: the policy's action shift against the optimal one (every action
    coordinate of every edited step, at most `max_points` per series, evenly spaced) for
    the agent's belief edit, its random-direction control and the control module's belief
    edit; the dashed diagonal is the optimal response. Returns {"<layer> <counterfactual>:
    <series>": points drawn} for callers to check."""
    from matplotlib.figure import Figure  # no pyplot: no backend switch, nothing to close

    rows = list(report.layers if layers is None else layers)
    unknown = [layer for layer in rows if layer not in report.layers]
    if unknown or not rows:
        raise ValueError(f"layers {unknown or rows} are not in the report ({report.layers})")
    series = [("agent", BELIEF, "C0", "agent: belief edit")]
    series.append(("agent", RANDOM, "0.55", "agent: random orthogonal edit"))
    if "control" in report.modules:
        series.append(("control", BELIEF, "C1", "control module: belief edit"))
    names = report.counterfactuals
    fig = Figure(figsize=(5.0 * len(names), 4.4 * len(rows)))
    axes = fig.subplots(len(rows), len(names), squeeze=False)
    drawn: dict[str, int] = {}
    for row, layer in zip(axes, rows, strict=True):
        for ax, name in zip(row, names, strict=True):
            low, high = 0.0, 0.0
            for label, kind, color, text in series:
                policy, optimal = report.shifts[(label, layer, name, kind)]
                x, y = optimal.reshape(-1), policy.reshape(-1)
                keep = np.unique(np.linspace(0, x.size - 1, min(x.size, max_points)).astype(int))
                score = report.modules[label][layer].edits[name].to_dict()[kind]["fraction"]
                suffix = "" if score is None else f" (fraction {score['value']:.2f})"
                ax.scatter(x[keep], y[keep], s=3, color=color, alpha=0.5, lw=0, label=text + suffix)
                drawn[f"{layer} {name}: {text}"] = int(keep.size)
                low = min(low, float(x.min()), float(y.min()))
                high = max(high, float(x.max()), float(y.max()))
            ax.plot([low, high], [low, high], color="k", lw=0.8, ls="--", label="optimal response")
            ax.set_xlabel("optimal action shift (b -> b')")
            ax.set_ylabel("policy's action shift (edited - unedited)")
            ax.set_title(f"{name} at {layer}", fontsize="medium")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="x-small", loc="upper left")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return drawn
