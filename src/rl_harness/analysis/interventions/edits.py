"""The edit of a representation that makes an affine probe read a chosen belief, and its
random control.

The edit (`minimum_norm_edit`): with the affine probe b_hat(h) = h @ W + c (W: d x k), the
least-norm change of h that moves the reading to b' is delta = (b' - b_hat(h)) @ pinv(W).
It lies in the column space of W (the directions the probe reads) and leaves the orthogonal
complement untouched. The pseudo-inverse drops singular values below `rank_tol` times the
largest: a probe of targets that sum to 1 (beliefs) has columns of W that sum to ~0, so W
has rank k - 1 and only readings on the plane sum(b) = 1 are reachable; a b' off that plane
gets the least-squares edit (the probe then reads the projection of b' onto the plane,
reported as `probe_miss_rms`). Beliefs in the simplex are always reachable.

The control edit (`orthogonal_directions`): at each step, the same length as the belief
edit, along a random unit direction orthogonal to the probe's subspace (a named seeding
stream). A second control, the same procedure on another module (e.g. an untrained one
with its own probe fitted on the same rollouts), is the caller's second module.

Pure NumPy; `BeliefEdit` is what `intervene` applies per recorded step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_harness.analysis.probes.affine import AffineProbe

RANK_TOL = 1e-8  # singular values below this fraction of the largest count as zero


@dataclass(frozen=True)
class ProbeSubspace:
    """What an affine probe reads: `inverse` (k, d) maps a change of the reading to the
    least-norm change of the representation; `basis` (d, rank) is an orthonormal basis of
    the directions it reads (the column space of its weights)."""

    inverse: np.ndarray
    basis: np.ndarray
    rank: int


def probe_subspace(probe: AffineProbe, rank_tol: float = RANK_TOL) -> ProbeSubspace:
    """The pseudo-inverse of the probe's weights (d, k), singular values below
    `rank_tol` x the largest dropped (a belief probe's weights have rank k - 1)."""
    weights = np.asarray(probe.weights, dtype=np.float64)
    u, s, vt = np.linalg.svd(weights, full_matrices=False)
    if s.size == 0 or not s[0] > 0:
        raise ValueError("the probe's weights are all zero: it reads no direction to edit")
    keep = s > rank_tol * s[0]
    u, s, vt = u[:, keep], s[keep], vt[keep]
    return ProbeSubspace(inverse=(vt.T / s) @ u.T, basis=u, rank=int(keep.sum()))


def minimum_norm_edit(
    probe: AffineProbe,
    representations: np.ndarray,
    targets: np.ndarray,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """(n, d) least-norm changes of (n, d) representations after which the probe reads
    (n, k) targets (or their least-squares best where W's rank falls short, see the module
    docstring); each change lies in the probe's subspace."""
    h = np.asarray(representations, dtype=np.float64)
    goal = np.asarray(targets, dtype=np.float64)
    if goal.shape != (h.shape[0], probe.weights.shape[1]):
        raise ValueError(
            f"targets must be (n, k) = ({h.shape[0]}, {probe.weights.shape[1]}), got {goal.shape}"
        )
    result: np.ndarray = (goal - probe.predict(h)) @ probe_subspace(probe, rank_tol).inverse
    return result


def orthogonal_directions(
    probe: AffineProbe,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """(*shape, d) random unit vectors orthogonal to the probe's subspace (Gaussian draws
    with that subspace projected out): the directions of the control edit."""
    basis = probe_subspace(probe, rank_tol).basis
    d = basis.shape[0]
    if basis.shape[1] >= d:
        raise ValueError(f"the probe reads all {d} directions: none is orthogonal to it")
    draws = rng.standard_normal((*shape, d))
    draws -= (draws @ basis) @ basis.T
    return draws / np.linalg.norm(draws, axis=-1, keepdims=True)


@dataclass(frozen=True)
class BeliefEdit:
    """One edit per recorded step of the episodes an intervention runs on (arrays aligned
    with `intervene`'s `episodes`): `targets` (E, T, k), what the probe reads after it, or
    `shift` (E, T, k), how far its reading moves. `directions` (E, T, d) unit vectors turn
    it into the control: the minimum-norm edit's length, along these directions."""

    targets: np.ndarray | None = None
    shift: np.ndarray | None = None
    directions: np.ndarray | None = None
