"""mixed_state_scatter: a pure plot of a mixed-state presentation (points where the beliefs
are, areas by probability), into the caller's Axes or a Figure pyplot does not track."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest

from rl_harness.analysis import barycentric_xy, mixed_state_scatter
from rl_harness.envs.hmm import mixed_state_presentation, zero_one_random_model
from rl_harness.envs.mess3 import mess3_model


def test_points_sit_at_the_beliefs_with_area_by_probability():
    beliefs, probabilities = mixed_state_presentation(zero_one_random_model(), 5).pooled()
    fig, ax = plt.subplots()
    try:
        returned = mixed_state_scatter(beliefs, probabilities, ax=ax, max_size=100.0)
        assert returned is fig
        points = ax.collections[0]
        order = np.argsort(-probabilities, kind="stable")  # largest drawn first
        np.testing.assert_allclose(points.get_offsets(), barycentric_xy(beliefs[order]))
        np.testing.assert_allclose(
            points.get_sizes(), 100.0 * probabilities[order] / probabilities.max()
        )
        # Colour is RGB = belief: the R corner (state 2, probability 2/9, the largest) is blue.
        np.testing.assert_allclose(points.get_facecolors()[0, :3], [0, 0, 1])
        # 36 p / (8/36) for p = (8, 7, 7, 6, 3, 3, 2) / 36, floored at 20.
        mixed_state_scatter(beliefs, probabilities, ax=ax, max_size=36.0, min_size=20.0)
        sizes = ax.collections[1].get_sizes()
        np.testing.assert_allclose(sizes, [36, 31.5, 31.5, 27, 20, 20, 20])
    finally:
        plt.close(fig)


def test_without_axes_it_returns_a_figure_pyplot_does_not_track():
    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    beliefs, probabilities = mixed_state_presentation(mess3_model(0.05, 0.85), 6).pooled()
    fig = mixed_state_scatter(beliefs, probabilities, title="MESS3", corner_labels="ABC")
    assert isinstance(fig, matplotlib.figure.Figure)
    assert plt.get_fignums() == figures and matplotlib.get_backend() == backend
    (ax,) = fig.axes
    assert ax.get_title() == "MESS3" and [t.get_text() for t in ax.texts] == ["A", "B", "C"]
    assert len(ax.collections[0].get_offsets()) == len(beliefs) == sum(3**d for d in range(7))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    image = matplotlib.image.imread(io.BytesIO(buffer.getvalue()))
    assert image.ndim == 3 and np.any(image[..., 0] > 0.9) and np.any(image[..., 2] > 0.9)


def test_bad_inputs_are_refused():
    beliefs = np.eye(3)
    with pytest.raises(ValueError, match="probabilities for beliefs"):
        mixed_state_scatter(beliefs, np.ones(2))
    with pytest.raises(ValueError, match="non-negative"):
        mixed_state_scatter(beliefs, np.array([0.5, -0.1, 0.6]))
    with pytest.raises(ValueError, match="colours"):
        mixed_state_scatter(beliefs, np.ones(3), colors=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="\\(n, 3\\)"):
        mixed_state_scatter(np.full((2, 4), 0.25), np.ones(2))
