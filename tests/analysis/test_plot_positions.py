"""The belief-simplex PNG draws each point where its belief (or prediction) says."""

from __future__ import annotations

import matplotlib.image
import numpy as np

from rl_harness.analysis.plots import plot_belief_simplex

RED, GREEN, BLUE = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
# Fractions of the triangle's bounding box, x from the left, y from the bottom.
BOTTOM_LEFT, BOTTOM_RIGHT, TOP = (0.0, 0.0), (1.0, 0.0), (0.5, 1.0)


def _mask(panel: np.ndarray, rgb, tol: float) -> np.ndarray:
    return np.all(np.abs(panel[..., :3] - np.asarray(rgb)) < tol, axis=-1)


def _where(panel: np.ndarray, rgb) -> tuple[float, float]:
    """Centroid of `rgb` pixels as fractions of the grey triangle outline's bounding box.

    The outline's bottom edge is the row with the most grey pixels; the panel's aspect is
    equal, so the apex lies sqrt(3)/2 edge lengths above it (title text is grey-ish too).
    """
    grey = _mask(panel, (0.6, 0.6, 0.6), 0.04)
    bottom = int(np.argmax(grey.sum(axis=1)))
    cols = np.nonzero(grey[bottom])[0]
    left, right = cols.min(), cols.max()
    top = bottom - (right - left) * np.sqrt(3) / 2
    r, c = np.nonzero(_mask(panel, rgb, 0.1))
    assert r.size > 20, f"no {rgb} points in this panel"
    return (c.mean() - left) / (right - left), (bottom - r.mean()) / (bottom - top)


def test_true_beliefs_and_predictions_are_drawn_at_their_own_positions(tmp_path):
    beliefs = np.repeat(np.eye(3), 20, axis=0)  # red, green, blue corners
    predicted = np.roll(beliefs, 1, axis=1)  # each prediction one corner on
    path = plot_belief_simplex(tmp_path / "simplex.png", beliefs, predicted, point_size=80)
    image = matplotlib.image.imread(path)
    half = image.shape[1] // 2
    truth, prediction = image[:, :half], image[:, half:]
    # Colour is the true belief in both panels; position is the panel's own values.
    for panel, expected in (
        (truth, {RED: BOTTOM_LEFT, GREEN: BOTTOM_RIGHT, BLUE: TOP}),
        (prediction, {RED: BOTTOM_RIGHT, GREEN: TOP, BLUE: BOTTOM_LEFT}),
    ):
        for rgb, corner in expected.items():
            np.testing.assert_allclose(_where(panel, rgb), corner, atol=0.06, err_msg=str(rgb))


def test_predictions_at_the_centre_are_drawn_at_the_centroid(tmp_path):
    beliefs = np.repeat(np.eye(3), 20, axis=0)
    predicted = np.full_like(beliefs, 1 / 3)
    path = plot_belief_simplex(tmp_path / "centre.png", beliefs, predicted, point_size=80)
    image = matplotlib.image.imread(path)
    prediction = image[:, image.shape[1] // 2 :]
    # All points overlap at the centroid (x 1/2, y 1/3 of the height); the last drawn
    # colour (blue) is on top.
    np.testing.assert_allclose(_where(prediction, BLUE), (0.5, 1 / 3), atol=0.04)
