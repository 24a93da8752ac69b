"""Plotting primitives, saved as PNG (no display needed).

Importing this module leaves matplotlib's backend alone (a notebook keeps its inline plots);
without a display, matplotlib itself falls back to the non-interactive Agg backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np

from rl_harness.harness.metric_keys import ENV_STEPS_KEY, RETURN_KEY

if TYPE_CHECKING:
    from matplotlib.patches import Patch

# Corners of the 2-simplex in the plane: state 0 bottom left, 1 bottom right, 2 on top.
SIMPLEX_CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]])


def barycentric_xy(points: np.ndarray) -> np.ndarray:
    """(n, 3) barycentric weights -> (n, 2) plane coordinates (rows need not sum to 1:
    a probe's predictions land where their affine combination of the corners puts them)."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"expected (n, 3) points on the 2-simplex, got shape {points.shape}")
    result: np.ndarray = points @ SIMPLEX_CORNERS
    return result


def belief_colors(beliefs: np.ndarray) -> np.ndarray:
    """RGB = belief (clipped to [0, 1]): a point's colour says which state it favours."""
    return np.clip(np.asarray(beliefs, dtype=np.float64), 0.0, 1.0)


def simplex_scatter(
    ax: Any,
    points: np.ndarray,
    *,
    colors: np.ndarray | str | None = None,
    title: str | None = None,
    size: float = 2.0,
    corner_labels: Sequence[str] | None = None,
    **scatter_kwargs: Any,
) -> Any:
    """Draw (n, 3) points on the 2-simplex into an existing matplotlib `ax`; returns `ax`.

    The primitive for composing multi-panel figures: the caller owns the figure. `colors`
    defaults to RGB = the points themselves (clipped to [0, 1]); pass the true beliefs to
    colour a probe's predictions by what they should be. `corner_labels` names states 0, 1, 2.
    Extra keyword arguments go to `ax.scatter`.
    """
    xy = barycentric_xy(points)
    if colors is None:
        colors = belief_colors(points)
    elif not isinstance(colors, str) and len(np.asarray(colors)) != len(xy):
        raise ValueError(f"{len(np.asarray(colors))} colours for {len(xy)} points")
    outline = np.vstack([SIMPLEX_CORNERS, SIMPLEX_CORNERS[:1]])
    ax.plot(outline[:, 0], outline[:, 1], color="0.6", lw=0.8)
    options = {"s": size, "linewidths": 0, "rasterized": True} | scatter_kwargs
    ax.scatter(xy[:, 0], xy[:, 1], c=colors, **options)
    if corner_labels is not None:
        if len(corner_labels) != 3:
            raise ValueError(f"corner_labels must name 3 corners, got {len(corner_labels)}")
        offsets = ((-0.04, -0.06), (0.04, -0.06), (0.0, 0.04))
        for (x, y), (dx, dy), text in zip(SIMPLEX_CORNERS, offsets, corner_labels, strict=True):
            ax.text(x + dx, y + dy, text, ha="center", va="center", fontsize="small")
    if title:
        ax.set_title(title)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax


def plot_belief_simplex(
    path: Path,
    true_beliefs: np.ndarray,
    predicted_beliefs: np.ndarray | None = None,
    *,
    title: str | None = None,
    labels: Sequence[str] = ("true belief", "probe prediction"),
    point_size: float = 2.0,
    corner_labels: Sequence[str] = ("state 0", "state 1", "state 2"),
) -> Path:
    """Beliefs in barycentric coordinates coloured by the true belief, optionally beside
    a probe's predictions of them (coloured by the same true beliefs). Returns `path`.

    One `simplex_scatter` panel each, its corners named (`corner_labels`: the states a
    corner is certain of), and a legend saying what the colour means; compose other
    layouts with `simplex_scatter` directly.
    """
    true_beliefs = np.asarray(true_beliefs, dtype=np.float64)
    colors = belief_colors(true_beliefs)
    panels = [(true_beliefs, labels[0])]
    if predicted_beliefs is not None:
        predicted_beliefs = np.asarray(predicted_beliefs, dtype=np.float64)
        if predicted_beliefs.shape != true_beliefs.shape:
            raise ValueError(
                f"predictions {predicted_beliefs.shape} and beliefs {true_beliefs.shape} differ"
            )
        panels.append((predicted_beliefs, labels[1]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 5.0), squeeze=False)
    for ax, (points, label) in zip(axes[0], panels, strict=True):
        simplex_scatter(
            ax, points, colors=colors, title=label, size=point_size, corner_labels=corner_labels
        )
    fig.legend(handles=belief_color_key(corner_labels), loc="lower center", ncols=3)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0.0, 0.07, 1.0, 1.0))  # room for the legend below the panels
    return save_png(fig, path, layout=False)


def belief_color_key(
    state_names: Sequence[str] = ("state 0", "state 1", "state 2"),
) -> list[Patch]:
    """Legend handles for RGB = belief: red, green, blue for all belief on each state. The
    swatches are a shade darker than the pure colours, so a pixel test of where the points
    of a colour lie is not pulled toward the legend."""
    from matplotlib.patches import Patch

    if len(state_names) != 3:
        raise ValueError(f"state_names must name 3 states, got {len(state_names)}")
    shades = ((0.8, 0.0, 0.0), (0.0, 0.8, 0.0), (0.0, 0.0, 0.8))
    return [
        Patch(color=shade, label=f"colour: belief in {name}")
        for shade, name in zip(shades, state_names, strict=True)
    ]


def plot_learning_curve(
    path: Path,
    rows: Sequence[Mapping[str, Any]],
    *,
    y_keys: Sequence[str] = (RETURN_KEY,),
    x_key: str = ENV_STEPS_KEY,
    references: Mapping[str, Mapping[str, float]] | None = None,
    title: str | None = None,
) -> Path:
    """Curves of `y_keys` against `x_key` from metrics.jsonl rows, one panel per key.

    `references` maps a y key to labelled horizontal lines for its panel, e.g.
    {"env_runners/episode_return_mean": {"Bayes-optimal": 43.7}}.
    """
    unknown = sorted(set(references or {}) - set(y_keys))
    if unknown:
        raise ValueError(f"references for keys that are not plotted: {unknown}")
    if not y_keys:
        raise ValueError("y_keys must name at least one metric")
    fig, axes = plt.subplots(len(y_keys), 1, figsize=(7, 3.2 * len(y_keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], y_keys, strict=True):
        points = [
            (row[x_key], row[key])
            for row in rows
            if row.get(x_key) is not None and row.get(key) is not None
        ]
        if points:
            xs, ys = np.asarray(points, dtype=np.float64).T
            ax.plot(xs, ys, marker="o", ms=3, lw=1.2, label=key)
        else:
            ax.text(0.5, 0.5, f"no values of {key}", ha="center", transform=ax.transAxes)
        for index, (label, value) in enumerate((references or {}).get(key, {}).items()):
            ax.axhline(value, ls="--", lw=1, color=f"C{index + 1}", label=label)
        ax.set_xlabel(x_key)
        ax.set_ylabel(key.rsplit("/", 1)[-1])
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return save_png(fig, path)


def save_png(fig: Any, path: Path, *, layout: bool = True) -> Path:
    """Lay out (unless `layout` is False: the caller did), save as PNG (the only format) and
    close `fig`; returns `path`."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        plt.close(fig)
        raise ValueError(f"plots are saved as PNG; got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def mixed_state_scatter(
    beliefs: np.ndarray,
    probabilities: np.ndarray,
    *,
    ax: Any | None = None,
    max_size: float = 60.0,
    min_size: float = 0.0,
    colors: np.ndarray | str | None = None,
    title: str | None = None,
    corner_labels: Sequence[str] | None = None,
) -> Any:
    """A mixed-state presentation in the 2-simplex: (n, 3) beliefs at their barycentric
    coordinates, each point's area proportional to its probability (the largest gets
    `max_size` points^2; `min_size` floors the rest, e.g. 0.5 to show the deep, improbable
    beliefs of a fractal). Returns the Figure drawn on.

    Pure: draws into `ax` when given (the caller owns its figure), else into a new
    `matplotlib.figure.Figure` that pyplot does not track (no backend switch, nothing to
    close; save it with `fig.savefig`). Larger points are drawn first so small ones stay
    visible. `colors` defaults to RGB = the belief; other arguments as `simplex_scatter`.
    """
    from matplotlib.figure import Figure

    beliefs = np.asarray(beliefs, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.shape != beliefs.shape[:1]:
        raise ValueError(f"{probabilities.shape} probabilities for beliefs {beliefs.shape}")
    if probabilities.size == 0 or np.any(probabilities < 0) or not probabilities.max() > 0:
        raise ValueError("probabilities must be non-negative with a positive maximum")
    if colors is None:
        colors = belief_colors(beliefs)
    order = np.argsort(-probabilities, kind="stable")
    if not isinstance(colors, str):
        colors = np.asarray(colors)
        if len(colors) != len(beliefs):
            raise ValueError(f"{len(colors)} colours for {len(beliefs)} points")
        colors = colors[order]
    if ax is None:
        ax = Figure(figsize=(5.0, 4.6)).add_subplot()
    sizes = np.maximum(max_size * probabilities[order] / probabilities.max(), min_size)
    simplex_scatter(
        ax, beliefs[order], colors=colors, title=title, corner_labels=corner_labels, s=sizes
    )
    return ax.figure
