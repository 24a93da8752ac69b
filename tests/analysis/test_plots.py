"""Plots are real PNGs whose pixels show what they should."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

from rl_harness.analysis.plots import barycentric_xy, plot_belief_simplex, plot_learning_curve


def _has_color(image: np.ndarray, rgb: tuple[float, float, float], tol: float = 0.1) -> bool:
    return bool(np.any(np.all(np.abs(image[..., :3] - np.asarray(rgb)) < tol, axis=-1)))


def test_barycentric_corners_and_centre():
    xy = barycentric_xy(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1 / 3, 1 / 3, 1 / 3]]))
    np.testing.assert_allclose(xy[:3], [[0, 0], [1, 0], [0.5, np.sqrt(3) / 2]])
    np.testing.assert_allclose(xy[3], [0.5, np.sqrt(3) / 6])
    with pytest.raises(ValueError, match="\\(n, 3\\)"):
        barycentric_xy(np.zeros((4, 2)))


def test_belief_simplex_colours_points_by_true_belief(tmp_path):
    beliefs = np.repeat(np.eye(3), 50, axis=0)
    predicted = np.full_like(beliefs, 1 / 3)  # all predictions at the centre
    path = plot_belief_simplex(tmp_path / "simplex.png", beliefs, predicted, point_size=80)
    image = matplotlib.image.imread(path)
    assert image.shape[1] > 1.8 * image.shape[0]  # two panels side by side
    left, right = image[:, : image.shape[1] // 2], image[:, image.shape[1] // 2 :]
    for rgb in [(1, 0, 0), (0, 1, 0), (0, 0, 1)]:
        assert _has_color(left, rgb), rgb
    # The prediction panel shows the same colours, all piled at the centre.
    assert _has_color(right, (1, 0, 0)) or _has_color(right, (0, 0, 1))

    single = plot_belief_simplex(tmp_path / "true_only.png", beliefs)
    assert matplotlib.image.imread(single).shape[1] < image.shape[1]
    with pytest.raises(ValueError, match="differ"):
        plot_belief_simplex(tmp_path / "bad.png", beliefs, predicted[:3])
    with pytest.raises(ValueError, match="PNG"):
        plot_belief_simplex(tmp_path / "simplex.pdf", beliefs)


def test_learning_curve_from_metrics_rows(tmp_path):
    rows = [
        {"num_env_steps_sampled_lifetime": 100 * i, "env_runners/episode_return_mean": i * 1.0}
        for i in range(1, 6)
    ] + [{"num_env_steps_sampled_lifetime": 600}]  # a row without the metric is skipped
    key = "env_runners/episode_return_mean"
    path = plot_learning_curve(
        tmp_path / "curve.png", rows, references={key: {"optimum": 6.0}}, title="returns"
    )
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100
    assert _has_color(image, (0.12, 0.47, 0.71), tol=0.05)  # matplotlib's C0 line
    two = plot_learning_curve(
        tmp_path / "two.png", rows, y_keys=["env_runners/episode_return_mean", "absent"]
    )
    assert matplotlib.image.imread(two).shape[0] > image.shape[0]
    with pytest.raises(ValueError, match="not plotted: \\['absent'\\]"):
        plot_learning_curve(tmp_path / "bad.png", rows, references={"absent": {"x": 1.0}})


def test_simplex_scatter_draws_into_a_callers_panel(tmp_path):
    import matplotlib.pyplot as plt

    from rl_harness.analysis.plots import simplex_scatter

    fig, axes = plt.subplots(1, 3, figsize=(9, 3))
    corners = np.eye(3)
    for ax, index in zip(axes, range(3), strict=True):
        returned = simplex_scatter(ax, corners[index : index + 1], size=400, title=f"p{index}")
        assert returned is ax and ax.get_title() == f"p{index}"
    offsets = [ax.collections[0].get_offsets() for ax in axes]
    for index, xy in enumerate(offsets):
        np.testing.assert_allclose(xy, barycentric_xy(corners[index : index + 1]))
    # Default colours are RGB = the point; explicit colours override them.
    np.testing.assert_allclose(axes[1].collections[0].get_facecolors()[0, :3], [0, 1, 0])
    simplex_scatter(axes[0], corners, colors="k", corner_labels=("a", "b", "c"))
    assert [t.get_text() for t in axes[0].texts] == ["a", "b", "c"]
    fig.savefig(tmp_path / "panels.png")
    plt.close(fig)
    image = matplotlib.image.imread(tmp_path / "panels.png")
    third = image.shape[1] // 3
    assert _has_color(image[:, :third], (1, 0, 0))
    assert _has_color(image[:, third : 2 * third], (0, 1, 0))
    assert _has_color(image[:, 2 * third :], (0, 0, 1))
    with pytest.raises(ValueError, match="2 colours for 3 points"):
        simplex_scatter(axes[0], corners, colors=np.zeros((2, 3)))


def test_belief_simplex_has_a_colour_legend_below_its_panels(tmp_path):
    """RGB = belief is said in a legend: its three swatches (a shade darker than the points'
    pure colours) lie in a strip below the panels, where no point is drawn."""
    beliefs = np.repeat(np.eye(3), 20, axis=0)
    path = plot_belief_simplex(tmp_path / "simplex.png", beliefs, beliefs, point_size=80)
    image = matplotlib.image.imread(path)
    strip = image[int(0.88 * image.shape[0]) :]  # the bottom eighth: the legend
    panels = image[: int(0.85 * image.shape[0])]
    for shade in [(0.8, 0, 0), (0, 0.8, 0), (0, 0, 0.8)]:
        assert _has_color(strip, shade, tol=0.03), shade
        assert not _has_color(panels, shade, tol=0.03), shade
