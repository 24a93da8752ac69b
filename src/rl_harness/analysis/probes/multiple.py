"""Families of tests: Holm's step-down correction and one-sided bootstrap p-values.

A table that reports one p-value per row (one per window length k, say) makes a family of
tests; reading any row as "shown" at level alpha needs the family corrected. Holm's method
controls the family-wise error rate under any dependence between the tests (the rows of a
table share data) and is uniformly more powerful than Bonferroni.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the input order (None entries stay None and are not counted
    in the family): sort the m defined p ascending, adjusted_(i) = max_{j <= i} min(1,
    (m - j + 1) p_(j)); reject at alpha where adjusted <= alpha."""
    defined = [(p, i) for i, p in enumerate(p_values) if p is not None]
    for p, _ in defined:
        if not (np.isfinite(p) and 0.0 <= p <= 1.0):
            raise ValueError(f"p-values must be in [0, 1], got {p!r}")
    out: list[float | None] = [None] * len(p_values)
    m = len(defined)
    running = 0.0
    for rank, (p, index) in enumerate(sorted(defined)):
        running = max(running, min(1.0, (m - rank) * float(p)))
        out[index] = running
    return out


def bootstrap_p_greater(samples: np.ndarray) -> float | None:
    """One-sided bootstrap p-value of H0 "the quantity is <= 0" from its resampled values
    (R,): (1 + #{resamples <= 0}) / (1 + #{finite resamples}); None when none is finite.
    The resamples are of the evaluation episodes (fits held fixed), so the p-value covers the
    evaluation's sampling noise, not the fits' own variability."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return float((1 + np.count_nonzero(values <= 0.0)) / (1 + values.size))
