"""MESS3 (Marzen & Crutchfield) and the fixed "control chain" with MESS3's emissions.

MESS3 with parameters x and alpha, b = (1 - alpha) / 2 and y = 1 - 2x:

    T[k, i, j] = (alpha if j == k else b) * (y if i == j else x)

i.e. a symmetric chain (stay with probability y) whose entered state j emits token j with
probability alpha. Its stationary distribution is uniform. Belief-geometry papers use
x = 0.05, alpha = 0.85 (PAPER_X, PAPER_ALPHA), where the belief fractal is visible.
"""

from __future__ import annotations

import numpy as np

from rl_harness.envs.hmm.model import HMMModel

PAPER_X = 0.05
PAPER_ALPHA = 0.85

# The control chain: a fixed, asymmetric 3-state chain (stationary distribution
# (0.45, 0.45, 0.10)) with MESS3's emission, the base chain OccupancyControlTask steers.
# It is not MESS3; its one knob is how fast it mixes (`control_chain_transition(mixing)`).
CONTROL_CHAIN_TRANSITION = np.array(
    [[0.75, 0.15, 0.10], [0.15, 0.75, 0.10], [0.45, 0.45, 0.10]], dtype=np.float64
)
CONTROL_CHAIN_TRANSITION.flags.writeable = False


def _check_alpha(alpha: float) -> float:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    return float(alpha)


def mess3_emission(alpha: float) -> np.ndarray:
    """E[s, o] = alpha if o == s else (1 - alpha) / 2."""
    alpha = _check_alpha(alpha)
    b = (1.0 - alpha) / 2.0
    return np.where(np.eye(3, dtype=bool), alpha, b)


def mess3_model(x: float, alpha: float) -> HMMModel:
    """The MESS3 HMM; the paper setting is `mess3_model(PAPER_X, PAPER_ALPHA)`."""
    if not 0.0 <= x <= 0.5:
        raise ValueError(f"x must lie in [0, 0.5] (so that 1 - 2x >= 0), got {x}")
    y = 1.0 - 2.0 * x
    transition = np.where(np.eye(3, dtype=bool), y, x)
    return HMMModel.from_transition_emission(
        transition,
        mess3_emission(alpha),
        np.full(3, 1.0 / 3.0),
        emitted_by="next",
        name=f"mess3(x={x:g}, alpha={alpha:g})",
    )


def control_chain_transition(mixing: float = 1.0) -> np.ndarray:
    """(1 - mixing) I + mixing B with B = CONTROL_CHAIN_TRANSITION: the lazy control chain.

    MESS3's x plays this part there (its chain is (1 - 3x) I + 3x * uniform): a smaller
    `mixing` keeps the stationary distribution and slows the chain, so a state persists
    for about 1 / mixing times as long and old tokens say more about the state now.
    mixing = 1 is the fixed control chain."""
    if isinstance(mixing, bool) or not isinstance(mixing, int | float):
        raise ValueError(f"mixing must be a number in (0, 1], got {mixing!r}")
    if not 0.0 < mixing <= 1.0:
        raise ValueError(f"mixing must lie in (0, 1], got {mixing}")
    if mixing == 1.0:
        return CONTROL_CHAIN_TRANSITION
    lazy = (1.0 - mixing) * np.eye(3) + mixing * CONTROL_CHAIN_TRANSITION
    lazy.flags.writeable = False
    return lazy


CONTROL_CHAIN_STARTS = ("stationary", "uniform")


def control_chain_model(alpha: float, mixing: float = 1.0, start: str = "stationary") -> HMMModel:
    """The control chain (`control_chain_transition(mixing)`; 1: CONTROL_CHAIN_TRANSITION)
    with MESS3 emissions. `start` is the initial law: "stationary" (the chain's, (0.45, 0.45,
    0.10), whatever the mixing) or "uniform" (1/3 each: the original RL-Harness
    `control_model`'s start)."""
    if start not in CONTROL_CHAIN_STARTS:
        raise ValueError(f"start must be one of {CONTROL_CHAIN_STARTS}, got {start!r}")
    initial = np.full(3, 1.0 / 3.0) if start == "uniform" else None
    transition = control_chain_transition(mixing)  # validates mixing
    name = f"control_chain(alpha={alpha:g})"
    if mixing != 1.0:
        name = f"control_chain(alpha={alpha:g}, mixing={mixing:g})"
    if start == "uniform":
        name = name[:-1] + ", start=uniform)"
    return HMMModel.from_transition_emission(
        transition,
        mess3_emission(alpha),
        initial,
        emitted_by="next",
        name=name,
    )
