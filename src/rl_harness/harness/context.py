"""The run's options, checked once, and the immutable context handed to every recipe's
`run(context)`.

`RunOptions` is what a run is asked for (the CLI parses its flags into one; notebooks and
scripts pass the same fields to `make_context`); `RunOptions.checked()` is the one place its
values are checked and normalised (one ValueError naming the bad one, before any folder
exists; `--smoke` and `--budget smoke` made one name), once per options value;
`make_context` resolves the recipe's budget from them, claims a run id and its folders, and
returns the `RunContext`, with the hardware profile resolved to a plan.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from rl_harness.harness.budgets import (
    SMOKE_BUDGET,
    BudgetChoice,
    BudgetError,
    resolve_budget,
    split_override,
)
from rl_harness.harness.hardware import (
    HardwarePlan,
    check_profile,
    check_torch_threads,
    resolve_profile,
)
from rl_harness.harness.layout import ARTIFACTS_PARENT, RESULTS_PARENT, RunPaths
from rl_harness.harness.locations import Location, location_text, path_or_uri
from rl_harness.harness.mirrors import check_log_targets

DEFAULT_SEED = 42
DEFAULT_PROFILE = "cpu-local"
MAX_SEED = 2**32 - 1  # NumPy and RLlib both accept seeds in [0, 2**32)
UploadMode = Literal["auto", "always", "never"]
UPLOAD_MODES = ("auto", "always", "never")
S = TypeVar("S", default=Any)  # a recipe's settings type (its budgets' dataclass); bare: Any


def new_run_id() -> str:
    """UTC timestamp plus 32 random bits, e.g. 20261202T134500Z-3f9a1c2e."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


def validate_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}], got {seed}")
    return seed


def valid_run_id(run_id: str) -> bool:
    """Letters, digits, '-', '_' and '.', not starting with '.': one folder name, no escape."""
    return bool(run_id) and all(c.isalnum() or c in "-_." for c in run_id) and run_id[0] != "."


@dataclass(frozen=True)
class RunOptions:
    """What a run is asked for: the one list of runtime options (`rl-harness TARGET --help`).

    `results_dir` / `artifacts_dir` are the parents of `<run-id>/` (default
    `<experiment dir>/results` and `/artifacts`); `upload_artifacts` and `verbose` concern
    the CLI's run around the recipe (the B2 mirror; Ray's notices on the console).
    """

    seed: int = DEFAULT_SEED
    smoke: bool = False  # the same as budget="smoke"
    budget: str | None = None  # a name in the recipe's budgets; None: its default
    overrides: tuple[str, ...] = ()  # "KEY=VALUE" on the budget's fields (--set)
    resume_from: Location | None = None  # a local path, or a URI kept as text (s3://...)
    hardware_profile: str = DEFAULT_PROFILE
    torch_threads: int | None = None  # the driver's torch threads; None: the plan's (hardware.py)
    results_dir: Path | None = None
    artifacts_dir: Path | None = None
    run_id: str | None = None  # default: a fresh one
    ray_address: str | None = None
    log_to: tuple[str, ...] = ()  # metrics mirrors: "tensorboard", "mlflow", "wandb"
    upload_artifacts: UploadMode = "auto"
    verbose: bool = False
    # Set on the value `checked()` returns; any `replace` makes a fresh, unchecked value.
    _checked: bool = field(default=False, init=False, repr=False, compare=False)

    def checked(self) -> RunOptions:
        """The options with every value checked (ValueError naming the bad one) and
        normalized: log targets deduplicated, a local resume path resolved, a URI kept,
        `smoke` and `budget="smoke"` made the same (after this, `budget` alone names the
        budget: "smoke" for `--smoke`). The one place options are checked: a value it
        returned is returned as is. Budget names and override keys are the recipe's,
        checked against it by `resolve_budget` (budgets.py)."""
        if self._checked:
            return self
        validate_seed(self.seed)
        if self.smoke and self.budget not in (None, SMOKE_BUDGET):
            raise ValueError(f"--smoke means --budget smoke, but --budget {self.budget} was given")
        smoke = self.smoke or self.budget == SMOKE_BUDGET
        if isinstance(self.overrides, str | Mapping) or not all(
            isinstance(text, str) for text in self.overrides
        ):
            raise ValueError(
                "overrides takes a sequence of 'KEY=VALUE' strings (as --set), e.g. "
                f"overrides=('iterations=3',), got {type(self.overrides).__name__} "
                f"{self.overrides!r}"
            )
        for text in self.overrides:
            split_override(text)
        check_profile(self.hardware_profile)
        if self.torch_threads is not None:
            check_torch_threads(self.torch_threads, "--torch-threads")
        if self.run_id is not None and not valid_run_id(self.run_id):
            raise ValueError(
                f"run id may hold letters, digits, '-', '_' and '.', got {self.run_id!r}"
            )
        if self.upload_artifacts not in UPLOAD_MODES:
            raise ValueError(
                f"upload_artifacts must be one of {', '.join(UPLOAD_MODES)}, "
                f"got {self.upload_artifacts!r}"
            )
        # A URI (a Tune experiment on the bucket, a checkpoint on s3://, gs://) stays text.
        resume = path_or_uri(self.resume_from) if self.resume_from else None
        if isinstance(resume, Path):
            resume = resume.expanduser().resolve()
            if not resume.exists():
                raise ValueError(f"resume path does not exist: {self.resume_from}")
        checked = replace(
            self,
            smoke=smoke,
            budget=SMOKE_BUDGET if smoke else self.budget,
            overrides=tuple(self.overrides),
            resume_from=resume,
            log_to=check_log_targets(self.log_to),
        )
        object.__setattr__(checked, "_checked", True)
        return checked

    def with_budget(self, choice: BudgetChoice) -> RunOptions:
        """The checked options naming the budget the recipe resolved (its default filled in),
        as the manifest records them (`options.budget`)."""
        options = self.checked()
        named = replace(
            options, budget=choice.name, smoke=options.smoke or choice.name == SMOKE_BUDGET
        )
        object.__setattr__(named, "_checked", True)  # a name the recipe declares: nothing new
        return named

    def to_dict(self) -> dict[str, Any]:
        """The options as the manifest records them (`options`)."""
        return {
            "seed": self.seed,
            "smoke": self.smoke,
            "budget": self.budget,
            "set": list(self.overrides),
            "resume_from": location_text(self.resume_from),
            "hardware_profile": self.hardware_profile,
            "torch_threads": self.torch_threads,
            "results_dir": str(self.results_dir) if self.results_dir else None,
            "artifacts_dir": str(self.artifacts_dir) if self.artifacts_dir else None,
            "run_id": self.run_id,
            "ray_address": self.ray_address,
            "upload_artifacts": self.upload_artifacts,
            "log_to": list(self.log_to),
            "verbose": self.verbose,
        }


@dataclass(frozen=True)
class RunContext(Generic[S]):
    """Where a run writes, which seed it uses, and which resources it may take.

    Nothing scientific lives here: recipes own their science. `budget` is the name of the
    recipe's budget this run uses and `settings` that budget (one of its `Recipe(budgets=...)`
    with any `--set` overrides applied, `overrides`), typed as the recipe's settings type S:
    `def run(context: RunContext[Budget])` reads `context.settings` as a Budget. A recipe
    without budgets gets None (S is None).
    """

    experiment_module: str
    experiment_dir: Path
    results_dir: Path  # compact records: <leaf>/results/<run-id>/ (tracked)
    artifacts_dir: Path  # large data: <leaf>/artifacts/<run-id>/ (ignored)
    run_id: str
    seed: int = DEFAULT_SEED
    smoke: bool = False  # budget == "smoke"
    budget: str | None = None  # the name in the recipe's budgets (budgets.py)
    # That budget, overrides applied (a frozen dataclass instance); None for a recipe without
    # budgets, whose S is None: a default only the no-budget case takes.
    settings: S = None  # type: ignore[assignment]
    overrides: dict[str, Any] = field(default_factory=dict)  # --set, parsed
    resume_from: Location | None = None  # a local Path, or a URI kept as text (s3://...)
    hardware: HardwarePlan = field(default_factory=lambda: resolve_profile(DEFAULT_PROFILE))
    ray_address: str | None = None
    log_to: tuple[str, ...] = ()  # metrics mirrors: "tensorboard", "mlflow", "wandb"
    # The checked options it was made from (the manifest records them as `options`).
    options: RunOptions = field(default_factory=RunOptions, repr=False)

    @property
    def budget_record(self) -> dict[str, Any]:
        """The budget as the manifest and config.json record it."""
        return BudgetChoice(self.budget, self.settings, dict(self.overrides)).record()

    @property
    def paths(self) -> RunPaths:
        """Every record and artifact file of this run (layout.py)."""
        return RunPaths(self.results_dir, self.artifacts_dir)


def _check_base(name: str, base: Path) -> None:
    # The nearest existing ancestor must be a folder, or mkdir fails after results/<id>/ exists.
    existing = next(p for p in (base, *base.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"{name} {base} is not a directory ({existing} is a file)")


def _unwritable(name: str, base: Path, error: OSError) -> ValueError:
    """A folder the run cannot create or write in, as one line (read-only, no permission)."""
    return ValueError(f"{name} {base} is not writable: {error.strerror or error}")


def _claim_run_dir(base: Path, run_id: str | None) -> tuple[str, Path]:
    """Create results/<run-id>/ exclusively, so two concurrent starts never share a run id."""
    base.mkdir(parents=True, exist_ok=True)
    if run_id is not None:
        path = base / run_id
        try:
            path.mkdir()
        except FileExistsError:
            raise FileExistsError(f"run id {run_id!r} already exists under {base}") from None
        return run_id, path
    for _ in range(100):
        candidate = new_run_id()
        try:
            (base / candidate).mkdir()
        except FileExistsError:
            continue
        return candidate, base / candidate
    raise RuntimeError(f"could not allocate a fresh run id under {base}")


def make_context(
    experiment_dir: Path,
    options: RunOptions | None = None,
    *,
    experiment_module: str = "adhoc",
    budget_choice: BudgetChoice | None = None,
    **fields: Any,
) -> RunContext[Any]:
    """Check the options, allocate a run id and its directories.

    `options` (default `RunOptions()`) with any of its fields replaced by keyword, e.g.
    `make_context(leaf, seed=3, smoke=True)`. Every option is checked first (ValueError;
    options already checked are not checked again), so a rejected run leaves no folder behind.

    The budget (`context.budget`, `context.settings`): `budget_choice` when given (the CLI
    resolves it from the recipe it loaded); else, when `experiment_module` is an imported
    module with a `RECIPE` (a notebook that imported the recipe), its budgets resolved from
    the options (budgets.py); else the name alone, no settings.
    """
    from rl_harness.harness.recipe import OLD_NAMES, RECIPE_NAME, declared_recipe

    options = replace(options, **fields) if options is not None and fields else options
    options = (options or RunOptions(**fields)).checked()
    budget = budget_choice
    module = sys.modules.get(experiment_module)
    if budget is None and module is not None:
        if any(hasattr(module, name) for name in (RECIPE_NAME, *OLD_NAMES)):
            declared = declared_recipe(module)  # the old names alone: the migration error
            budget = resolve_budget(
                declared, options.budget, options.overrides, owner=experiment_module
            )
    if budget is None:
        if options.overrides:
            raise BudgetError(
                f"--set needs the recipe's budgets: import {experiment_module} first, or pass "
                "budget_choice=resolve_budget(RECIPE, ...)"
            )
        budget = BudgetChoice(options.budget)
    options = options.with_budget(budget)
    hardware = resolve_profile(options.hardware_profile, torch_threads=options.torch_threads)
    experiment_dir = Path(experiment_dir).resolve()
    results_base = (
        Path(options.results_dir).resolve()
        if options.results_dir
        else experiment_dir / RESULTS_PARENT
    )
    artifacts_base = (
        Path(options.artifacts_dir).resolve()
        if options.artifacts_dir
        else experiment_dir / ARTIFACTS_PARENT
    )
    _check_base("results dir", results_base)
    _check_base("artifacts dir", artifacts_base)
    try:
        run_id, run_results = _claim_run_dir(results_base, options.run_id)
    except FileExistsError:
        raise
    except OSError as error:
        raise _unwritable("results dir", results_base, error) from None
    run_artifacts = artifacts_base / run_id
    try:
        run_artifacts.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        run_results.rmdir()  # still empty: give the claimed run id back
        raise _unwritable("artifacts dir", artifacts_base, error) from None
    return RunContext(
        experiment_module=experiment_module,
        experiment_dir=experiment_dir,
        results_dir=run_results,
        artifacts_dir=run_artifacts,
        run_id=run_id,
        seed=options.seed,
        smoke=options.smoke,
        budget=budget.name,
        settings=budget.settings,
        overrides=dict(budget.overrides),
        resume_from=options.resume_from,
        hardware=hardware,
        ray_address=options.ray_address,
        log_to=options.log_to,
        options=options,
    )
