"""The study's comparison: every training leaf's runs, arms side by side, against the solvers.

What it shows: for each arm (reward_only, next_token_aux, belief_observation) over its runs
(training seeds): return per step under greedy and sampled actions and as a fraction of the
belief-MDP ceiling, and the decision-belief probe R² (global, within branches of equal last
2 visible tokens, and of equal tokens and binned actions) of the agent against its controls
on the agent's own held-out steps (an untrained module of the same architecture replayed on
the agent's observations, the raw observation, window baselines on the last k tokens and
actions), the paired agent-minus-control and agent-minus-best-window differences, the
within-branch permutation p-value, the per-k window and per-layer within-branch R²; mean
and 95% Student-t interval across runs
(rl_harness.analysis.comparison, the machinery of `rl-harness compare`). The solver values
(oracle, belief MDP, best stack-2, best memoryless) head the table.

Runs read: the completed runs under `<study>/<leaf>/results/` (or under
`$MESS3_BELIEF_GEOMETRY_RUNS/<leaf>/results/` when set), of one budget: `--budget cpu` (the
default), `--budget full`, `--smoke`; runs of other budgets are never pooled (study_table.md
names those left out). Runs from different library commits are refused
except in smoke mode (the error names them).

Task points (issue 52 item 2): each run's operating point is read from its record (its
budget's `task_point` setting; older records: the flagship) and runs of different points are
never pooled: each point gets its own comparison, read against that point's solver values as
its runs recorded them (solver_values.json: ceilings, best stack-1/2/3 found, convergence
flags). The flagship's files are written at the top of results/<run-id>/, another point's
(the `_memory` leaves: "memory") under results/<run-id>/<point>/, with the README's
memory-point tables (report.MEMORY_TABLES) in its study_table.md.

Run (from the experiment repo, after the training leaves):

    uv run rl-harness experiments.mess3_belief_geometry.synthesis.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.synthesis.experiment

Memory yardstick (issue 37; `yardstick.py`): each run's yardstick.json (written by the training
leaf, or for a finished run by `rl-harness analyze
experiments.mess3_belief_geometry.<leaf>.experiment RUN`): the agent's within-branch R² beside
exact filters of the last m steps (tokens and executed actions, from the stationary law and from
the agent's own state law), the m it is worth, the within-branch variance share, random ReLU
features of the agent's input window, several untrained initialisations and the windows' MLP on
the agent's representation. A run without the file is listed as missing.

Memory beyond a window (issue 52 item 1; `incremental.py`): each run's result.json
`incremental_r2` (in-run, or for a finished run `rl-harness analyze
experiments.mess3_belief_geometry.<leaf>.experiment RUN`): per arm and k = 1..K,
b - a (the agent's increment over the window of tokens and executed actions) and b - c (minus
the untrained module's), globally and within tokens_2: mean across seeds, t-interval, one-sided
t-test p of mean > 0 and that p Holm-corrected over the k family (`p_holm`). A run without it
is listed as missing.

Writes results/<run-id>/study_table.md (solver values, the comparison table, the memory
yardstick, the incremental R² table), yardstick.json, incremental.json, comparison.md,
comparison.json and comparison.png (one panel per metric, each run a dot).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry import controls, incremental, report, task
from experiments.synthesis_budgets import BUDGETS, DEFAULT_BUDGET, Pool, run_budget
from rl_harness import (
    MetricNotFound,
    Recipe,
    Results,
    RunContext,
    load_manifest,
    read_results,
    write_json,
)
from rl_harness.analysis.comparison import (
    compare_runs,
    comparison_markdown,
    write_comparison,
)

TRAINING_LEAVES = (
    "reward_only",
    "next_token_aux",
    "belief_observation",
    "reward_only_memory",
    "next_token_aux_memory",
)
RUNS_ENV = "MESS3_BELIEF_GEOMETRY_RUNS"  # a study root holding <leaf>/results/<run-id>/
# result.json keys of each training run (see analysis.summary).
METRICS = [
    "return_per_step/greedy",
    "return_per_step/sampled",
    "fraction_of_belief_mdp/greedy",
    "probe_r2",
    "probe_r2_within_branch",
    "probe_r2_within_action_branch",
    "untrained_r2",
    "untrained_r2_within_branch",
    "observation_r2",
    "observation_r2_within_branch",
    "agent_minus_untrained_within_branch",
    "agent_minus_best_window_within_branch",
    "agent_minus_best_window_within_action_branch",
    "best_window_k",
    "window_reaches_agent_within_branch_at_k",
    "within_branch_permutation_p_value",
]
# Per-k and per-layer keys (result.json "window_r2_within_branch" / "layer_r2_within_branch"):
# those every run has are added (the smoke budget fits fewer windows than the CPU one).
PER_RUN_GROUPS = ("window_r2_within_branch", "layer_r2_within_branch")
# The controls scored on data the agent did not choose (result.json "controls_by_data", per
# data set: controls.DATA_SETS); added when every run has them (runs before issue 37 lack them).
DATA_SET_METRICS = (
    "return_per_step",
    "agent_r2_within_branch",
    "untrained_r2_within_branch",
    "agent_minus_untrained_within_branch",
    "agent_minus_best_window_within_branch",
    "agent_minus_best_tokens_window_within_branch",
    "action_branches_added",
)


def metric_keys(folders: list[Path]) -> list[str]:
    """METRICS, then `<group>/<key>` for each per-k or per-layer key all runs report."""
    common: dict[str, list[str]] = {}
    by_data: list[str] = [
        f"{controls.KEY}/{name}/{key}" for name in controls.DATA_SETS for key in DATA_SET_METRICS
    ]
    for index, folder in enumerate(folders):
        result = read_results(folder)
        for group in PER_RUN_GROUPS:
            keys = [
                name.removeprefix(f"{group}/") for name in result if name.startswith(f"{group}/")
            ]
            common[group] = keys if index == 0 else [k for k in common[group] if k in keys]
        by_data = [k for k in by_data if k in result]
    per_run = [f"{group}/{key}" for group in PER_RUN_GROUPS for key in common.get(group, [])]
    return METRICS + per_run + by_data


def study_root(context: RunContext) -> Path:
    return Path(os.environ.get(RUNS_ENV) or context.experiment_dir.parent)


def run_folders(root: Path, budget: str) -> tuple[list[Path], dict[str, list[str]]]:
    """(completed runs of the training leaves under `root` of `budget`, {other budget: run
    ids left out})."""
    folders: list[Path] = []
    others: dict[str, list[str]] = {}
    for leaf in TRAINING_LEAVES:
        for manifest in sorted((root / leaf / "results").glob("*/run_manifest.json")):
            record = load_manifest(manifest.parent) or {}
            if record.get("status") != "completed":
                continue
            if run_budget(record) == budget:
                folders.append(manifest.parent)
            else:
                others.setdefault(run_budget(record), []).append(manifest.parent.name)
    return folders, others


def points(folders: Sequence[Path]) -> dict[str, list[Path]]:
    """The runs by operating point (each run's `task_point` setting, as recorded; records from
    before the setting are the flagship's): runs of different points are never pooled. The
    flagship first, then the other points in `task.TASK_POINTS` order."""
    grouped: dict[str, list[Path]] = {}
    for folder in folders:
        grouped.setdefault(report.read_run(folder).task_point, []).append(folder)
    order = list(task.TASK_POINTS)
    return dict(sorted(grouped.items(), key=lambda item: order.index(item[0])))


def point_values(folders: Sequence[Path]) -> dict[str, Any]:
    """The solver values of these runs' one point, as the runs recorded them
    (solver_values.json; the same for every run or an error): a point's runs are read
    against its own ceilings, never the flagship's."""
    return dict(report.point_solver_values([report.read_run(folder) for folder in folders]))


def solver_table(values: dict) -> str:
    converged = values.get("converged") or {}
    lines = ["| reference (solver) | return per step | converged |", "|---|---|---|"]
    for key, label in task.REFERENCES.items():
        value = values.get(key)
        flag = {True: "yes", False: "NO"}.get(converged.get(key), "-")
        lines.append(f"| {label} | {'pending' if value is None else f'{value:.4f}'} | {flag} |")
    problem = values.get("problem") or {}
    where = ", ".join(f"{key} {value}" for key, value in problem.items())
    return "\n".join(lines) + f"\n\nSolver values from {values.get('source')} ({where}).\n"


def yardstick_rows(folders: list[Path]) -> list[dict[str, Any]]:
    """One row per run: arm, seed, run id and its yardstick.json (None when missing)."""
    from experiments.mess3_belief_geometry import yardstick

    rows = []
    for path in folders:
        seed = (load_manifest(path) or {})["seed"]
        file = path / yardstick.YARDSTICK_FILE
        record = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
        arm = path.parent.parent.name
        rows.append({"arm": arm, "seed": int(seed), "run": path.name, "record": record})
    return rows


def yardstick_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Each run's agent within-branch R² beside the m-step filters and untrained baselines."""

    def number(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    def ordered(values: Mapping[str, Any], prefix: str) -> list[Any]:
        """The values of {"<prefix><n>": value} in numeric order of n (JSON sorts keys)."""
        return [values[key] for key in sorted(values, key=lambda k: int(k[len(prefix) :]))]

    def worth(value: Mapping[str, Any], n: int) -> str:
        reach, interp = value.get("reaches_agent_at_m"), value.get("interpolated_m")
        if reach is None:
            return f"> {n}"
        return f"{reach}" + ("" if interp is None else f" ({interp:.1f})")

    lines = [
        "Within-branch R² (equal last 2 visible tokens) of each run's agent beside exact "
        "filters of only the last m steps (visible tokens and the executed actions in that "
        "span; same greedy episodes, split and affine probe), from the stationary law and from "
        "the agent's own state law (policy), the m the agent is worth (the first m whose filter "
        "reaches it; interpolated in R²), random ReLU features of the agent's input window "
        "(widths), 5 untrained initialisations replayed on the agent's observations (mean, "
        "min to max) and the windows' MLP on the agent's representation:",
        "",
        "| arm | seed | agent | worth m: stationary / policy | filter m = 1..6 (stationary) "
        "| filter m = 1..6 (policy) | variance share | random ReLU 64 / 256 / 1024 | "
        "untrained x5 | MLP: agent |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        record = row["record"]
        if record is None:
            lines.append(
                f"| {row['arm']} | {row['seed']} | missing: `rl-harness analyze "
                f"experiments.mess3_belief_geometry.{row['arm']}.experiment {row['run']}`"
                " | | | | | | | |"
            )
            continue
        filters = record["filters_r2_within_branch"]
        n = len(filters["stationary"])
        equivalent = record["equivalent_memory"]
        untrained = record["untrained"]["r2_within_branch"]
        untrained_text = (
            "-"
            if untrained.get("mean") is None
            else f"{untrained['mean']:.3f} ({untrained['min']:.3f} to {untrained['max']:.3f})"
        )
        lines.append(
            f"| {row['arm']} | {row['seed']} | {number(record['agent']['r2_within_branch'])} | "
            f"{worth(equivalent['stationary'], n)} / {worth(equivalent['policy'], n)} | "
            + " | ".join(
                ", ".join(number(v) for v in ordered(filters[prior], "m"))
                for prior in ("stationary", "policy")
            )
            + f" | {record['within_branch_variance_fraction']['held_out']:.4f} | "
            + " / ".join(
                number(v) for v in ordered(record["random_features_r2_within_branch"], "width")
            )
            + f" | {untrained_text} | {number(record['mlp_r2_within_branch']['agent'])} |"
        )
    return "\n".join(lines) + "\n"


def reviewed_tables(folders: Sequence[Path]) -> str:
    """The README's generated tables (report.py) over these runs: interventions beside the
    untrained module's, the controls' family with Holm, arms compared on shared data, power
    at the stated effect, "worth m" only where the filter rises. Runs that lack a record the
    table reads (smoke runs have no controls_by_data) leave it out, and the file says so."""
    runs = sorted(
        (report.read_run(folder) for folder in folders),
        key=lambda run: (TRAINING_LEAVES.index(run.arm), run.seed),
    )
    point = report.one_point(runs)  # one point's runs only: an error otherwise
    tables = report.TABLES if point in (None, "flagship") else report.MEMORY_TABLES
    sections = []
    for name, table in tables.items():
        try:
            body = table(runs)
        except KeyError as error:  # a record these runs lack (older or smoke runs)
            # A metric their result.json lacks reads as the key it is (`MetricNotFound.name`).
            what = KeyError(error.name) if isinstance(error, MetricNotFound) else error
            body = f"Not made for these runs ({type(what).__name__}: {what})."
        sections.append(f"\n## {name}\n\n{body}\n")
    return "".join(sections)


# The incremental test's across-seed table (result.json "incremental_r2", incremental.py): per
# arm and k, each quantity's per-seed values, their mean and t-interval, the one-sided t-test
# p of mean > 0 across seeds, Holm-corrected over the k family of that arm, quantity and score.
INCREMENTAL_QUANTITIES = {
    "agent_increment": "b - a (agent increment)",
    "agent_minus_control": "b - c (agent increment - untrained increment)",
}
INCREMENTAL_SCORES = {"": "global", "_within_branch": "within tokens_2"}


def incremental_table(folders: list[Path]) -> dict[str, Any]:
    """{arms: {arm: {seeds, missing, quantities: {quantity+score: [{k, mean, low, high, values,
    p, p_holm}]}}}} from each run's result.json `incremental_r2` (runs without it: missing);
    the statistics are report.incremental_rows' (the README's memory-point tables use them)."""
    by_arm: dict[str, dict[str, Any]] = {}
    for path in folders:
        arm = path.parent.parent.name
        seed = (load_manifest(path) or {}).get("seed")
        result = read_results(path)
        entry = by_arm.setdefault(arm, {"seeds": [], "missing": [], "runs": []})
        if not report.incremental_ks(result, incremental.KEY):
            entry["missing"].append(path.name)
            continue
        entry["seeds"].append(seed)
        entry["runs"].append(result)
    out: dict[str, Any] = {}
    for arm, entry in by_arm.items():
        headlines = entry.pop("runs")
        out[arm] = entry | {"quantities": report.incremental_rows(headlines, incremental.KEY)}
    return {
        "test": "per arm and k: mean across seeds of each run's held-out quantity, 95% "
        "Student-t interval, one-sided one-sample t-test p of mean > 0 across seeds, Holm-"
        "corrected over the k of that arm, quantity and score (the family)",
        "arms": out,
    }


def incremental_markdown(table: Mapping[str, Any]) -> str:
    """The across-seed table of b - a and b - c per k (study_table.md's incremental section)."""

    def number(value: Any, sign: bool = True) -> str:
        return "-" if value is None else (f"{value:+.4f}" if sign else f"{value:.3g}")

    lines = [
        "Incremental R² over a window (incremental.py; the library's `incremental_r2`): per k, "
        "the windows' MLP on the last k visible tokens and executed actions (what the agent "
        "read) alone (a), with the agent's representation's read-out (b), with the untrained "
        "module's (c); each run's b - a and b - c on its own held-out episodes, then across "
        "seeds: mean [95% t-interval] (n), one-sided t-test p of mean > 0, Holm-corrected over "
        "k = 1..K per arm, quantity and score (named p_holm).",
        "",
        "| arm | quantity | score | k | mean [95% t] (n) | p | p_holm | per seed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, entry in table["arms"].items():
        if entry["missing"]:
            lines.append(
                f"| {arm} | missing in {', '.join(entry['missing'])}: `rl-harness analyze "
                f"experiments.mess3_belief_geometry.{arm}.experiment <run-id>` | | | | | | |"
            )
        for name, rows in entry["quantities"].items():
            quantity = next(q for q in INCREMENTAL_QUANTITIES if name.startswith(q))
            score = INCREMENTAL_SCORES[name[len(quantity) :]]
            for row in rows:
                interval = (
                    "" if row["low"] is None else f" [{number(row['low'])}, {number(row['high'])}]"
                )
                lines.append(
                    f"| {arm} | {INCREMENTAL_QUANTITIES[quantity]} | {score} | {row['k']} | "
                    f"{number(row['mean'])}{interval} ({row['n']}) | "
                    f"{number(row['p'], False)} | {number(row['p_holm'], False)} | "
                    + ", ".join(number(v) for v in row["values"])
                    + " |"
                )
    return "\n".join(lines) + "\n"


def run(context: RunContext[Pool]) -> Results:
    root = study_root(context)
    budget = context.settings.runs_budget
    folders, other_budgets = run_folders(root, budget)
    if not folders:
        raise RuntimeError(
            f"no completed {budget} runs of {', '.join(TRAINING_LEAVES)} under {root}; "
            "run the training leaves first (other budgets: "
            f"{', '.join(other_budgets) or 'none'})"
        )
    left = "; ".join(f"{name}: {', '.join(ids)}" for name, ids in other_budgets.items())
    by_point = points(folders)
    summaries: dict[str, dict[str, Any]] = {}
    files: list[str] = []
    for point, point_folders in by_point.items():
        # The flagship's files at the top of results/<run-id>/, another point's in <point>/.
        out = context.results_dir if point == "flagship" else context.results_dir / point
        out.mkdir(parents=True, exist_ok=True)
        summaries[point] = write_point(point, point_folders, out, budget, left, context.smoke)
        files += [
            str(path.relative_to(context.results_dir)) for path in summaries[point].pop("files")
        ]
    label = {
        point: (lambda arm: arm) if point == "flagship" else (lambda arm, p=point: f"{arm}@{p}")
        for point in summaries
    }
    # result.json: each number named once; the runs' budget and the files written are notes.
    results = Results(notes={"budget": budget, "left_out_other_budgets": other_budgets})
    results.add("runs", sum(summary["runs"] for summary in summaries.values()))
    for point, summary in summaries.items():
        for arm, n in summary["arms"].items():
            results.add(f"arms/{label[point](arm)}", n)
    # The flagship's ceilings (or the only point's, when no flagship run).
    for key, value in next(iter(summaries.values()))["solver_values"].items():
        results.add(f"solver_values/{key}", value)
    for point, summary in summaries.items():
        for arm, value in summary["greedy_return_per_step"].items():
            results.add(f"greedy_return_per_step/{label[point](arm)}", value)
    for point, summary in summaries.items():
        results.add(f"points/{point}/runs", summary["runs"])
        for key, value in summary["solver_values"].items():
            results.add(f"points/{point}/solver_values/{key}", value)
        results.notes[f"points/{point}/solver_values"] = summary["solver_notes"]
    results.notes["files"] = files
    return results


def write_point(
    point: str, folders: list[Path], out: Path, budget: str, left: str, smoke: bool
) -> dict[str, Any]:
    """One operating point's comparison, read against that point's solver values (as its runs
    recorded them), into `out`: study_table.md, comparison.*, yardstick.json,
    incremental.json."""
    # One budget, read by run_budget (which also reads records from before budgets had
    # names): compare_runs, which sees only recorded names, need not refuse them again.
    comparison = compare_runs(
        folders, metric_keys(folders), allow_mixed=smoke, allow_mixed_budgets=True
    )
    try:
        values = point_values(folders)
    except FileNotFoundError:  # runs recorded without solver_values.json: the point's solve
        values = task.solver_values(point=task.TASK_POINTS[point])
    files = write_comparison(comparison, out)
    yardsticks = yardstick_rows(folders)
    write_json(out / "yardstick.json", yardsticks)
    increments = incremental_table(folders)
    write_json(out / "incremental.json", increments)
    table = out / "study_table.md"
    table.write_text(
        f"# MESS3 occupancy control at task point `{point}`: arms against its solver ceilings\n\n"
        + solver_table(values)
        + f"\nBudget: {budget} runs only"
        + (f" (left out: {left})" if left else "")
        + "; runs of other task points are in their own tables.\n\n"
        + comparison_markdown(comparison)
        + "\n## Memory yardstick\n\n"
        + yardstick_markdown(yardsticks)
        + "\n## Memory beyond a window: incremental R²\n\n"
        + incremental_markdown(increments)
        + reviewed_tables(folders),
        encoding="utf-8",
    )
    return {
        "runs": len(comparison.runs),
        "arms": {arm.arm: arm.n_runs for arm in comparison.arms},
        "solver_values": {key: values.get(key) for key in task.REFERENCES},
        "solver_notes": {"converged": values.get("converged"), "problem": values.get("problem")},
        "greedy_return_per_step": {
            arm.arm: arm.metrics["return_per_step/greedy"].mean for arm in comparison.arms
        },
        "files": [table, *files, out / "yardstick.json", out / "incremental.json"],
    }


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
