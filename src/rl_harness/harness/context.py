"""The immutable runtime context handed to every recipe's `run(context)`."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from rl_harness.harness.hardware import HardwarePlan, resolve_profile
from rl_harness.harness.locations import Location, path_or_uri
from rl_harness.harness.mirrors import check_log_targets

DEFAULT_SEED = 42
MAX_SEED = 2**32 - 1  # NumPy and RLlib both accept seeds in [0, 2**32)


def new_run_id() -> str:
    """UTC timestamp plus 32 random bits, e.g. 20261202T134500Z-3f9a1c2e."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


@dataclass(frozen=True)
class RunContext:
    """Where a run writes, which seed it uses, and which resources it may take.

    Nothing scientific lives here: recipes own their science.
    """

    experiment_module: str
    experiment_dir: Path
    results_dir: Path  # compact records: <leaf>/results/<run-id>/ (tracked)
    artifacts_dir: Path  # large data: <leaf>/artifacts/<run-id>/ (ignored)
    run_id: str
    seed: int = DEFAULT_SEED
    smoke: bool = False
    resume_from: Location | None = None  # a local Path, or a URI kept as text (s3://...)
    hardware: HardwarePlan = field(default_factory=lambda: resolve_profile("cpu-local"))
    ray_address: str | None = None
    log_to: tuple[str, ...] = ()  # metrics mirrors: "tensorboard", "mlflow", "wandb"


def validate_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}], got {seed}")
    return seed


def valid_run_id(run_id: str) -> bool:
    """Letters, digits, '-', '_' and '.', not starting with '.': one folder name, no escape."""
    return bool(run_id) and all(c.isalnum() or c in "-_." for c in run_id) and run_id[0] != "."


def _check_base(name: str, base: Path) -> None:
    # The nearest existing ancestor must be a folder, or mkdir fails after results/<id>/ exists.
    existing = next(p for p in (base, *base.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"{name} {base} is not a directory ({existing} is a file)")


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
    *,
    experiment_module: str = "adhoc",
    seed: int = DEFAULT_SEED,
    smoke: bool = False,
    run_id: str | None = None,
    results_dir: Path | None = None,
    artifacts_dir: Path | None = None,
    hardware_profile: str = "cpu-local",
    resume_from: Location | None = None,
    ray_address: str | None = None,
    log_to: tuple[str, ...] = (),
) -> RunContext:
    """Allocate a run id and its directories.

    `results_dir` / `artifacts_dir` are the parents under which `<run-id>/` is made
    (default `<experiment_dir>/results` and `<experiment_dir>/artifacts`). Every option is
    checked first (ValueError), so a rejected run leaves no folder behind.
    """
    seed = validate_seed(seed)
    hardware = resolve_profile(hardware_profile)
    log_to = check_log_targets(log_to)
    if run_id is not None and not valid_run_id(run_id):
        raise ValueError(f"run id may hold letters, digits, '-', '_' and '.', got {run_id!r}")
    # A URI (a Tune experiment on the bucket, a checkpoint on s3://, gs://) stays text.
    resume = path_or_uri(resume_from) if resume_from else None
    if isinstance(resume, Path):
        resume = resume.expanduser().resolve()
        if not resume.exists():
            raise ValueError(f"resume path does not exist: {resume_from}")
    experiment_dir = Path(experiment_dir).resolve()
    results_base = Path(results_dir).resolve() if results_dir else experiment_dir / "results"
    artifacts_base = (
        Path(artifacts_dir).resolve() if artifacts_dir else experiment_dir / "artifacts"
    )
    _check_base("results dir", results_base)
    _check_base("artifacts dir", artifacts_base)
    run_id, run_results = _claim_run_dir(results_base, run_id)
    run_artifacts = artifacts_base / run_id
    try:
        run_artifacts.mkdir(parents=True, exist_ok=True)
    except OSError:
        run_results.rmdir()  # still empty: give the claimed run id back
        raise
    return RunContext(
        experiment_module=experiment_module,
        experiment_dir=experiment_dir,
        results_dir=run_results,
        artifacts_dir=run_artifacts,
        run_id=run_id,
        seed=seed,
        smoke=smoke,
        resume_from=resume,
        hardware=hardware,
        ray_address=ray_address,
        log_to=log_to,
    )
