"""How a probe is fitted and scored: one record every probe entry point takes.

`ProbeSettings` holds the choices that can change a probe's numbers (ridge, held-out
fraction, bootstrap and permutation counts, the branch depth of within-branch R², the seed
and its stream), so the agent's probe, its per-layer and per-checkpoint probes and the
baselines scored on its split state them once. Every probe entry point takes one
`ProbeSettings`; loose probe keywords (`seed=`, `ridge=`, `branch_k=`, ...: the compatibility
path this record replaced, removed) are refused with a TypeError naming it
(`require_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real

DEFAULT_STREAM = ("analysis", "probe")
VARIANCE_TOL = 1e-10  # relative: variance <= tol * mean square counts as never varying


def _count(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")


@dataclass(frozen=True)
class ProbeSettings:
    """An affine probe's protocol.

    - `seed`, `stream`: the named streams `(*stream, "split" | "bootstrap" | "permutation" |
      "within_permutation")` of `seed` draw the split, the resamples and the shuffles.
    - `ridge`: ridge * |W|² added to the squared error (the bias is never penalized).
    - `test_fraction`: the share of episodes held out (whole episodes, at least one each side).
    - `n_bootstrap`, `confidence`: episode resamples of the held-out scores, interval level.
    - `branch_depth`: within-branch R² over branches of the last `branch_depth` per-step
      codes (`branches.branch_ids`); None: no within-branch scores.
    - `n_permutations`, `n_within_permutations`: refits of the global null and of the
      conditional (within-branch) null; 0: none.
    - `variance_tol`: a target whose held-out variance is at most this times its mean
      square has no R².
    """

    seed: int
    ridge: float = 0.0
    test_fraction: float = 0.25
    n_bootstrap: int = 1000
    confidence: float = 0.95
    branch_depth: int | None = None
    n_permutations: int = 0
    n_within_permutations: int = 0
    stream: tuple[str, ...] = DEFAULT_STREAM
    variance_tol: float = VARIANCE_TOL

    def __post_init__(self) -> None:
        if not isinstance(self.seed, Integral) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if not isinstance(self.ridge, Real) or not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be a finite number >= 0, got {self.ridge!r}")
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "ridge", float(self.ridge))
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}")
        _count("n_bootstrap", self.n_bootstrap, 1)
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if self.branch_depth is not None:
            _count("branch_depth", self.branch_depth, 0)
        _count("n_permutations", self.n_permutations, 0)
        _count("n_within_permutations", self.n_within_permutations, 0)
        object.__setattr__(self, "stream", tuple(self.stream))


def require_settings(
    settings: ProbeSettings | None, loose: Mapping[str, object], where: str
) -> ProbeSettings:
    """`settings`, checked: loose probe keywords, a missing record or any other object is a
    TypeError naming ProbeSettings (the loose-keyword path is removed: state the protocol
    once, `ProbeSettings(seed=..., ridge=..., branch_depth=...)`)."""
    if loose:
        raise TypeError(
            f"{where}() takes the probe protocol as one ProbeSettings, not loose keyword "
            f"arguments ({', '.join(sorted(loose))}): pass ProbeSettings(seed=..., ...)"
        )
    if not isinstance(settings, ProbeSettings):
        raise TypeError(
            f"{where}() needs settings=ProbeSettings(seed=...), got {type(settings).__name__}"
        )
    return settings
