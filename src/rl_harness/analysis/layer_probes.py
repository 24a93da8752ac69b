"""Where the target appears: a probe of every named representation (each block's residual).

`probe_layers(module, rollouts, ...)` replays the rollouts once through the module with an
extractor of named representations (default `replay.residual_representations`: "embed",
"block_1".."block_L" before the final norm, "final_norm" after it) and fits the same affine
probe to each under one `ProbeSettings` (the agent probe's: the same split, bootstrap
resamples and branches), globally and within branches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.probes.evaluate import ProbeEvaluation, ProbeReport, evaluate_probe
from rl_harness.analysis.probes.settings import ProbeSettings, require_settings
from rl_harness.analysis.replay import Preprocess, replay_rollouts_named, residual_representations
from rl_harness.analysis.rollouts import RepresentationExtractor, Rollouts

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule


@dataclass(frozen=True)
class LayerProbes:
    """One probe report per named representation, in the module's order; `evaluations`
    keeps each fitted probe with its split (e.g. for interventions along a layer's probe)."""

    reports: dict[str, ProbeReport]
    evaluations: dict[str, ProbeEvaluation] = field(default_factory=dict, repr=False, compare=False)

    def table(self) -> list[dict[str, Any]]:
        """Rows {name, n_features, r2_pooled, within_branch_r2_pooled} (Estimates as dicts)."""
        rows = []
        for name, report in self.reports.items():
            within = report.within_branch
            rows.append(
                {
                    "name": name,
                    "n_features": report.n_features,
                    "r2_pooled": None if report.r2_pooled is None else report.r2_pooled.to_dict(),
                    "within_branch_r2_pooled": (
                        None
                        if within is None or within.r2_pooled is None
                        else within.r2_pooled.to_dict()
                    ),
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table(),
            "reports": {name: report.to_dict() for name, report in self.reports.items()},
        }


def probe_named(
    named: dict[str, np.ndarray],
    targets: np.ndarray,
    settings: ProbeSettings | None = None,
    *,
    target_names: Sequence[str] | None = None,
    branch_tokens: np.ndarray | None = None,
    progress: Callable[[str], None] | None = None,
    **loose: object,
) -> LayerProbes:
    """`evaluate_probe` of each (E, T, d) representation in `named` against the same
    targets under the same `settings` (a `ProbeSettings`, required), so every
    representation gets the same split and resamples."""
    settings = require_settings(settings, loose, "probe_named")
    reports, evaluations = {}, {}
    for name, features in named.items():
        evaluations[name] = evaluate_probe(
            features, targets, settings, target_names=target_names, branch_tokens=branch_tokens
        )
        reports[name] = evaluations[name].report
        if progress is not None:
            r2 = reports[name].r2_pooled
            progress(f"layer probe {name}: R² {'undefined' if r2 is None else f'{r2.value:.4f}'}")
    return LayerProbes(reports, evaluations)


def probe_layers(
    module: RLModule,
    rollouts: Rollouts,
    settings: ProbeSettings | None = None,
    *,
    representation: RepresentationExtractor = residual_representations,
    preprocess: Preprocess | None = None,
    targets: np.ndarray | None = None,
    target_names: Sequence[str] | None = None,
    branch_tokens: np.ndarray | None = None,
    progress: Callable[[str], None] | None = None,
    **loose: object,
) -> LayerProbes:
    """Replay `rollouts` through `module` once, collecting every named representation, and
    probe each for `targets` (default `rollouts.targets`) under `settings` (a
    `ProbeSettings`, required)."""
    settings = require_settings(settings, loose, "probe_layers")
    named = replay_rollouts_named(
        module, rollouts, representation=representation, preprocess=preprocess
    )
    return probe_named(
        named,
        rollouts.targets if targets is None else targets,
        settings,
        target_names=target_names,
        branch_tokens=branch_tokens,
        progress=progress,
    )
