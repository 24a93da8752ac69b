"""What every synthesis leaf of this repo shares about budgets: it pools the training runs of
one budget, chosen by name like any recipe's (`--budget NAME`, `--smoke`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pool:
    runs_budget: str  # the budget of the training runs this synthesis pools (never two)


# `--budget NAME` pools the training runs of that budget only (`--smoke`: the smoke runs).
BUDGETS = {"smoke": Pool("smoke"), "cpu": Pool("cpu"), "full": Pool("full")}
DEFAULT_BUDGET = "cpu"


def run_budget(manifest: Mapping[str, Any]) -> str:
    """A training run's budget: its recorded name (`options.budget`; smoke for --smoke).
    Runs recorded before budgets had names chose FULL on a GPU hardware plan, else CPU."""
    options = manifest.get("options") or {}
    if options.get("smoke"):
        return "smoke"
    if options.get("budget"):
        return str(options["budget"])
    plan = (manifest.get("hardware") or {}).get("plan") or {}
    return "full" if (plan.get("num_gpus_per_learner") or 0) > 0 else "cpu"
