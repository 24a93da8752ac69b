"""The study README's generated tables: our runs beside the original's, from committed
records alone.

Every table between `<!-- report:NAME -->` and `<!-- /report:NAME -->` in the README is
written here from our runs' result.json and run_manifest.json (the run ids named in
`RUNS`) and from original_figures.json (the original's records, each with its repository,
path and commit); a fast test (tests/study/test_action_symmetry_report.py) regenerates them
and fails when the README differs. After new runs land, add their ids to `RUNS` and:

    uv run python -m experiments.mess3_action_symmetry.report --write
    uv run python -m experiments.mess3_action_symmetry.report --check   # exit 1 on a difference

A leaf with no run named yet gets a "not run yet" row. The original ran one seed (42) per
variant, so its seed spread is none; ours is the range over the seeds named here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.mess3_action_symmetry.task import ACTION_NAMES
from rl_harness import Results, read_results
from rl_harness.analysis import readme_main

STUDY_DIR = Path(__file__).resolve().parent
README = STUDY_DIR / "README.md"
ORIGINAL_FIGURES = STUDY_DIR / "original_figures.json"
LEAVES = ("variant_2", "variant_2_no_delay")

# The runs the README cites, per leaf.
RUNS: dict[str, tuple[str, ...]] = {
    "variant_2": ("20261207T145805Z-1e498c3a", "20261207T173338Z-ac5a9eb5"),
    "variant_2_no_delay": ("20261207T143026Z-ea6b971e",),
}


@dataclass(frozen=True)
class StudyRun:
    leaf: str
    seed: int
    run_id: str
    budget: str
    result: Results  # result.json's named metrics
    # A `--resume-from` run's parent (manifest `parent`): its run id and the iteration the
    # continuation started from; None for a run trained in one piece.
    parent: tuple[str, int] | None = None


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_run(folder: Path) -> StudyRun:
    """One completed run's records (`<study>/<leaf>/results/<run-id>`); else an error."""
    manifest = _read(folder / "run_manifest.json")
    if manifest.get("status") != "completed":
        raise FileNotFoundError(f"{folder}: not a completed run")
    return StudyRun(
        leaf=folder.parent.parent.name,
        seed=int(manifest["seed"]),
        run_id=folder.name,
        budget=str(manifest["budget"]["name"]),
        result=read_results(folder),
        parent=_parent(manifest),
    )


def _parent(manifest: Mapping[str, Any]) -> tuple[str, int] | None:
    parent = manifest.get("parent")
    return None if not parent else (str(parent["run_id"]), int(parent["iteration"]))


def _label(run: StudyRun) -> str:
    """The run's row label: its id and budget, and the run it continues, if any."""
    label = f"ours `{run.run_id}` ({run.budget}"
    if run.parent is not None:
        label += f", continuing `{run.parent[0]}` from its iteration {run.parent[1]}"
    return label + ")"


def load_runs(runs: Mapping[str, Sequence[str]] = RUNS, root: Path = STUDY_DIR) -> list[StudyRun]:
    loaded = [read_run(root / leaf / "results" / rid) for leaf, ids in runs.items() for rid in ids]
    return sorted(loaded, key=lambda run: (LEAVES.index(run.leaf), run.budget, run.seed))


def load_original(path: Path = ORIGINAL_FIGURES) -> dict[str, Any]:
    return dict(_read(path))


def _f(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _fractions(values: Sequence[float | None] | None) -> str:
    """Shares joined by " / "; "-" for a group the run never visited (or no record)."""
    return "-" if values is None else " / ".join(_f(v, 3) for v in values)


def _mse_ratio(mse: float | None, baseline: float | None) -> str:
    return "-" if mse is None or not baseline else f"{mse / baseline:.1f}"


HEADER = (
    "| source | seed | env steps | greedy noop / positive / negative | occupancy of state 2 "
    "(greedy) | agreement with the one-step oracle (greedy / sampled) | greedy noop in hidden "
    "state 0 / 1 / 2 | sampled noop in hidden state 0 / 1 / 2 | probe R² | probe MSE | MSE / "
    "branch-mean MSE |"
)
RULE = "|---|---|---|---|---|---|---|---|---|---|---|"


def _pair(a: float | None, b: float | None) -> str:
    return "-" if a is None and b is None else f"{_f(a, 3)} / {_f(b, 3)}"


def original_rows(original: Mapping[str, Any], leaf: str) -> list[str]:
    """The original's checkpoints of `leaf`: the last, and one matched to our CPU budget."""
    run = next(r for r in original["runs"] if r["leaf"] == leaf)
    where = f"original `{run['run_id']}` ([record]({_link(original, run)}))"
    rows = []
    for key, label in (("matched_cpu", "matched to our cpu budget"), ("final", "final")):
        point = run.get(key)
        if point is None:
            continue
        agreement = _pair(
            point.get("greedy_myopic_oracle_agreement"),
            point.get("sampled_myopic_oracle_agreement"),
        )
        rows.append(
            f"| {where}, {label} | {run['seed']} | {point['env_steps']:,} | "
            f"{_fractions(point['greedy_action_fractions'])} | "
            f"{_f(point['reward_state_2_fraction_greedy'])} | "
            f"{agreement} | "
            f"{_fractions(point.get('greedy_noop_by_hidden_state'))} | "
            f"{_fractions(point.get('sampled_noop_by_hidden_state'))} | "
            f"{_f(point['r_squared'])} | {_f(point['mse'], 5)} | "
            f"{_mse_ratio(point['mse'], point['branch_baseline_mse'])} |"
        )
    return rows


def _link(original: Mapping[str, Any], run: Mapping[str, Any]) -> str:
    return f"https://github.com/{original['repository']}/blob/{run['commit']}/{run['path']}"


def _named(result: Results, prefix: str, names: Sequence[str]) -> list[float | None]:
    """The metrics `prefix/name` of each name, in order (None: undefined for the run)."""
    return [result.value(f"{prefix}/{name}") for name in names]


def our_row(run: StudyRun) -> str:
    r = run.result
    states = [f"state_{s}" for s in range(3)]
    return (
        f"| {_label(run)} | {run.seed} | {int(r.value('env_steps') or 0):,} | "
        f"{_fractions(_named(r, 'greedy_action_fraction', ACTION_NAMES))} | "
        f"{_f(r.value('reward_state_2_fraction_greedy'))} | "
        f"{_pair(r.value('oracle_agreement_greedy'), r.value('oracle_agreement_sampled'))} | "
        f"{_fractions(_named(r, 'greedy_noop_fraction', states))} | "
        f"{_fractions(_named(r, 'sampled_noop_fraction', states))} | "
        f"{_f(r.value('probe_r2'))} | {_f(r.value('probe_mse'), 5)} | "
        f"{_mse_ratio(r.value('probe_mse'), r.value('branch_baseline_mse'))} |"
    )


def final_table(runs: Sequence[StudyRun], original: Mapping[str, Any], leaf: str) -> str:
    """One leaf: each of our runs at its last checkpoint beside the original's records."""
    ours = [run for run in runs if run.leaf == leaf]
    lines = [HEADER, RULE]
    lines += [our_row(run) for run in ours] or [
        "| ours: not run yet (commands: README, Run) | - | - | - | - | - | - | - | - | - | - |"
    ]
    lines += original_rows(original, leaf)
    return "\n".join(lines)


def _spread(values: Sequence[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    mean = sum(present) / len(present)
    if len(present) == 1:
        return f"{mean:.3f} (1 seed)"
    return f"{mean:.3f} ({min(present):.3f}-{max(present):.3f})"


def spread_table(runs: Sequence[StudyRun], original: Mapping[str, Any]) -> str:
    """Per leaf and budget: our mean (min-max over seeds), beside the original's one seed."""
    lines = [
        "| leaf | source | seeds | occupancy of state 2 (greedy) | agreement with the oracle "
        "(greedy) | probe R² |",
        "|---|---|---|---|---|---|",
    ]
    for leaf in LEAVES:
        ours = [run for run in runs if run.leaf == leaf]
        budgets = sorted({run.budget for run in ours})
        for budget in budgets:
            group = [run.result for run in ours if run.budget == budget]
            lines.append(
                f"| {leaf} | ours ({budget}) | {len(group)} | "
                f"{_spread([r.value('reward_state_2_fraction_greedy') for r in group])} | "
                f"{_spread([r.value('oracle_agreement_greedy') for r in group])} | "
                f"{_spread([r.value('probe_r2') for r in group])} |"
            )
        if not budgets:
            lines.append(f"| {leaf} | ours | 0 (not run yet) | - | - | - |")
        run = next(r for r in original["runs"] if r["leaf"] == leaf)
        final = run["final"]
        lines.append(
            f"| {leaf} | original (final) | 1 ({run['seed']}): no spread | "
            f"{final['reward_state_2_fraction_greedy']:.3f} | "
            f"{_f(final.get('greedy_myopic_oracle_agreement'), 3)} | {final['r_squared']:.3f} |"
        )
    return "\n".join(lines)


TABLES: dict[str, Callable[[Sequence[StudyRun], Mapping[str, Any]], str]] = {
    "variant_2": lambda runs, original: final_table(runs, original, "variant_2"),
    "variant_2_no_delay": lambda runs, original: final_table(runs, original, "variant_2_no_delay"),
    "spread": spread_table,
}


def blocks(runs: Sequence[StudyRun], original: Mapping[str, Any]) -> dict[str, str]:
    return {name: table(runs, original) for name, table in TABLES.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the README's generated tables; `--check` exits 1 when they differ."""
    return readme_main(
        README,
        lambda: blocks(load_runs(), load_original()),
        prog="python -m experiments.mess3_action_symmetry.report",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
