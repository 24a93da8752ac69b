"""The study's comparison: PPO against supervised next-token training, over training.

Arms (`arm_folders`): each leaf's runs split by the initialisation each run recorded in its
config.json (`module.init`; a run from before the init keys had the library's only init,
today's default) and by training code (`split_by_code`: runs whose library training files
differ from the newest run's are "earlier code": shown over training beside the others,
never compared, pooled or paired with them). Paired differences: each arm against its step 0
and the raw window; supervised - ppo at one initialisation; ppo - ppo_default_init (the
init ablation). arms.json maps every run to its arm.

What it shows: for each leaf (ppo, supervised) over its runs (training seeds): greedy
accuracy against the exact Bayes-optimal accuracy of a 10-token observer, and the affine
probe's R² from the post-final-norm residual to the exact belief (global and within
branches of equal last 2 tokens), at the end (mean and 95% Student-t interval across runs,
rl_harness.analysis.comparison, the machinery of `rl-harness compare`) and at every probed
checkpoint from step 0 on (mean, min and max across runs at each env-step count: the
schedule is the same for every run of a budget).

Runs read: the completed runs under `<study>/<leaf>/results/` (or under
`$MESS3_TOKEN_GUESS_RUNS/<leaf>/results/` when set) of one budget: `--budget cpu` (the
default), `--budget full`, `--smoke`; runs of other budgets are never pooled (study_table.md
names those left out). Runs from different library commits are compared only when
the library source files they recorded differ only in the B2 mirror (`harness/storage/`,
which a run without --log-to never calls): study_table.md then names the commits and the
files that differ; runs of other training code are "earlier code" (above). Smoke mode
compares every run.

Run (from the experiment repo, after the training leaves):

    uv run rl-harness experiments.mess3_token_guess.synthesis.experiment --smoke
    uv run rl-harness experiments.mess3_token_guess.synthesis.experiment

Controls and the statistic that carries the claim: per seed, the raw window (the same affine
probe from the 10-token one-hot input itself, no network: `shared.window_control`, on that
seed's probe episodes) beside each run's own step-0 network; and paired per-seed differences
of within-branch R² (end - step 0, end - raw window, supervised - ppo) with their mean and
95% Student-t interval across seeds.

Memory yardstick (issue 37; `yardstick.py`): each run's yardstick.json (written by the training
leaf, or for a finished run by `rl-harness analyze
experiments.mess3_token_guess.<leaf>.experiment RUN`): the agent's within-branch R² beside exact
filters of the last m tokens, the m it is worth, the within-branch variance share, random ReLU
features of the window, several untrained initialisations and the windows' MLP on the agent and
on the raw window. A run without the file is listed as missing.

Writes results/<run-id>/study_table.md (ceilings, the final comparison, the controls and
paired differences, the memory yardstick, the table over training), controls.json,
yardstick.json, over_training.json, over_training.png, and comparison.md/.json/.png.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy import stats

from experiments.mess3_token_guess import shared
from experiments.synthesis_budgets import BUDGETS, DEFAULT_BUDGET, Pool, run_budget
from rl_harness import Recipe, Results, RunContext, load_manifest, write_json
from rl_harness.analysis.comparison import (
    Comparison,
    compare_runs,
    comparison_markdown,
    write_comparison,
)
from rl_harness.learners.models import TransformerActorCritic

TRAINING_LEAVES = ("ppo", "supervised", "ppo_default_init")
RUNS_ENV = "MESS3_TOKEN_GUESS_RUNS"  # a study root holding <leaf>/results/<run-id>/
# result.json keys of each training run (see shared.summary).
METRICS = [
    "greedy_accuracy",
    "fraction_of_bayes_optimal",
    "probe_r2",
    "probe_r2_within_branch",
    "step0_probe_r2",
    "step0_probe_r2_within_branch",
]
OVER_TRAINING = ("greedy_accuracy", "r2", "r2_within_branch")
# Library files a training run without --log-to never executes: runs whose library sources
# differ only here are the same code for this study.
OUTSIDE_TRAINING = ("harness/storage/",)


def study_root(context: RunContext) -> Path:
    return Path(os.environ.get(RUNS_ENV) or context.experiment_dir.parent)


def run_folders(root: Path, budget: str) -> tuple[dict[str, list[Path]], dict[str, list[str]]]:
    """({leaf: completed run folders of `budget`}, {other budget: run ids left out})."""
    folders: dict[str, list[Path]] = {}
    others: dict[str, list[str]] = {}
    for leaf in TRAINING_LEAVES:
        for manifest in sorted((root / leaf / "results").glob("*/run_manifest.json")):
            record = load_manifest(manifest.parent) or {}
            if record.get("status") != "completed":
                continue
            if run_budget(record) == budget:
                folders.setdefault(leaf, []).append(manifest.parent)
            else:
                others.setdefault(run_budget(record), []).append(manifest.parent.name)
    return folders, others


def library_source_differences(paths: Sequence[Path]) -> dict[str, Any]:
    """The library commits of these runs and the library files (run_manifest.json's
    library.sources: the files each run loaded, file -> sha256) whose content differs
    between runs that loaded them."""
    commits: dict[str, list[str]] = {}
    sources: list[Mapping[str, str]] = []
    for path in paths:
        library = (load_manifest(path) or {}).get("library", {})
        commits.setdefault(str(library.get("commit")), []).append(path.name)
        sources.append(library.get("sources") or {})
    # A run records the library files it loaded; a file only some runs loaded is not a
    # difference in the code they shared.
    names = sorted({name for files in sources for name in files})
    differing = [n for n in names if len({files[n] for files in sources if n in files}) > 1]
    return {
        "commits": commits,
        "differing_files": differing,
        "same_code_for_training": all(n.startswith(OUTSIDE_TRAINING) for n in differing),
    }


def split_by_code(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(runs of the newest run's training code, earlier runs): a run is of the same code when
    every library file both runs loaded has the same content, outside OUTSIDE_TRAINING. Run
    ids start with their UTC start time, so the newest is the greatest name."""
    if not paths:
        return [], []

    def sources(path: Path) -> Mapping[str, str]:
        manifest = load_manifest(path) or {}
        return (manifest.get("library") or {}).get("sources") or {}

    reference = sources(max(paths, key=lambda path: path.name))
    current, earlier = [], []
    for path in paths:
        files = sources(path)
        same = all(
            files[name] == digest
            for name, digest in reference.items()
            if name in files and not name.startswith(OUTSIDE_TRAINING)
        )
        (current if same else earlier).append(path)
    return current, earlier


def run_init(path: Path) -> dict[str, Any]:
    """The initialisation a run's module got, from its config.json: `module.init` (recorded
    since the init keys exist), else resolved from its model_config with the library's
    defaults, which are the only init the library had before the keys (bit for bit)."""
    record = json.loads((path / "config.json").read_text(encoding="utf-8"))
    module = record.get("module") or {}
    if module.get("init"):
        return dict(module["init"])
    return TransformerActorCritic.resolved_init(module.get("model_config") or {})


def init_label(init: Mapping[str, Any]) -> str:
    """A short name of an initialisation, e.g. "normal 0.02, pi x1, vf x1"."""
    trunk = init["init"] if init.get("init_std") is None else f"{init['init']} {init['init_std']:g}"
    return f"{trunk}, pi x{init['pi_output_scale']:g}, vf x{init['vf_output_scale']:g}"


@dataclasses.dataclass(frozen=True)
class Arm:
    """Runs that may be pooled: one leaf, one recorded initialisation, one training code."""

    leaf: str
    init: str  # init_label of the runs' recorded initialisation
    earlier_code: bool = False  # trained by library code other than the newest run's

    @property
    def name(self) -> str:
        return f"{self.leaf} [{self.init}]" + (" (earlier code)" if self.earlier_code else "")


def arm_folders(
    folders: Mapping[str, Sequence[Path]], earlier: Sequence[Path] = ()
) -> dict[Arm, list[Path]]:
    """{arm: its runs}: each leaf's runs split by their recorded initialisation and by code
    (`earlier`: runs of earlier training code, never pooled with the current ones)."""
    late = set(earlier)
    arms: dict[Arm, list[Path]] = {}
    for leaf, paths in folders.items():
        for path in paths:
            arm = Arm(leaf, init_label(run_init(path)), path in late)
            arms.setdefault(arm, []).append(path)
    return arms


def contrasts(arms: Sequence[Arm]) -> list[tuple[Arm, Arm]]:
    """The between-arm differences the study reads, as (a, b) for a - b: supervised against
    ppo at the same initialisation; ppo against the init ablation (ppo_default_init)."""
    pairs = []
    for a in arms:
        for b in arms:
            if a.earlier_code or b.earlier_code:
                continue
            if (a.leaf, b.leaf) == ("supervised", "ppo") and a.init == b.init:
                pairs.append((a, b))
            if (a.leaf, b.leaf) == ("ppo", "ppo_default_init") and a.init != b.init:
                pairs.append((a, b))
    return pairs


def compare_arms(arms: Mapping[Arm, Sequence[Path]], allow_mixed: bool) -> Comparison:
    """`compare_runs` per arm (so runs of different initialisations never pool), merged into
    one Comparison whose arms are named by leaf and initialisation."""
    merged: Comparison | None = None
    for arm, paths in arms.items():
        # One budget, read by run_budget (which also reads records from before budgets had
        # names): compare_runs, which sees only recorded names, need not refuse them again.
        part = compare_runs(paths, METRICS, allow_mixed=allow_mixed, allow_mixed_budgets=True)
        part = dataclasses.replace(
            part,
            arms=[dataclasses.replace(a, arm=arm.name) for a in part.arms],
            runs=[dataclasses.replace(r, arm=arm.name) for r in part.runs],
        )
        if merged is None:
            merged = part
            continue
        commits = list(dict.fromkeys([*merged.library_commits, *part.library_commits]))
        merged = dataclasses.replace(
            merged,
            arms=[*merged.arms, *part.arms],
            runs=[*merged.runs, *part.runs],
            library_commits=commits,
            notes=list(dict.fromkeys([*merged.notes, *part.notes])),
        )
    if merged is None:
        raise RuntimeError("no runs to compare")
    return merged


def arms_markdown(arms: Mapping[Arm, Sequence[Path]]) -> str:
    """Which runs form each arm (leaf, recorded initialisation, code)."""
    lines = [
        "\nArms: a leaf's runs split by the initialisation each run recorded (config.json "
        "`module.init`; a run from before the init keys had the library default, "
        "torch_default, pi x0.01, vf x1) and by training code; arms never pool. "
        '"(earlier code)": trained by library code that differs from the newest run\'s in a '
        "training file: shown over training only, not compared or paired.\n",
        "| arm | runs |",
        "|---|---|",
    ]
    for arm, paths in arms.items():
        lines.append(f"| {arm.name} | {', '.join(sorted(p.name for p in paths))} |")
    return "\n".join(lines) + "\n"


def budget_markdown(budget: str, others: Mapping[str, Sequence[str]]) -> str:
    """Which budget this table pools, and the runs of other budgets it left out."""
    left = "; ".join(f"{name}: {', '.join(ids)}" for name, ids in others.items())
    return f"\nBudget: {budget} runs only" + (f" (left out: {left})" if left else "") + ".\n"


def library_markdown(differences: Mapping[str, Any]) -> str:
    commits = differences["commits"]
    if len(commits) < 2:
        return ""
    listing = "; ".join(f"{c[:12]}: {len(ids)} runs" for c, ids in commits.items())
    files = ", ".join(differences["differing_files"]) or "none"
    return (
        f"\nRuns from {len(commits)} library commits ({listing}); library files whose "
        f"content differs between them: {files}.\n"
    )


def seed_records[K](folders: Mapping[K, Sequence[Path]]) -> dict[K, dict[int, dict[str, Any]]]:
    """{arm: {seed: the run's probe_metrics.json}} (the newest run where a seed repeats)."""
    records: dict[K, dict[int, dict[str, Any]]] = {}
    for leaf, paths in folders.items():
        for path in sorted(paths):
            seed = (load_manifest(path) or {})["seed"]
            record = json.loads((path / "probe_metrics.json").read_text(encoding="utf-8"))
            records.setdefault(leaf, {})[int(seed)] = record
    return records


def window_controls(records: Mapping[Any, Mapping[int, Mapping[str, Any]]]) -> dict[int, Any]:
    """{seed: the raw-window probe (shared.window_control) on that seed's probe episodes},
    with the probe budget the runs recorded."""
    from experiments.mess3_token_guess.ppo import experiment as ppo

    controls = {}
    for seed in sorted({seed for by_seed in records.values() for seed in by_seed}):
        record = next(by_seed[seed] for by_seed in records.values() if seed in by_seed)
        plan = SimpleNamespace(**record["budget"])
        controls[seed] = shared.window_control(ppo.module_spec(), plan, seed)
    return controls


def _final(record: Mapping[str, Any], key: str) -> float | None:
    return record["checkpoints"][-1].get(key)


def _step0(record: Mapping[str, Any], key: str) -> float | None:
    first = record["checkpoints"][0]
    return first.get(key) if first.get("env_steps") == 0 else None


def paired_differences(
    records: Mapping[Arm, Mapping[int, Mapping[str, Any]]], controls: Mapping[int, Any]
) -> list[dict[str, Any]]:
    """Per-seed differences of within-branch R² (the statistic that carries the claim), with
    their mean and 95% Student-t interval across seeds: each arm's trained network against
    its own step-0 network and against the raw window; then `contrasts` (supervised - ppo at
    one initialisation, ppo - ppo_default_init: the init ablation)."""
    key = "r2_within_branch"
    pairs: list[tuple[str, dict[int, float | None]]] = []
    for arm, by_seed in records.items():
        pairs.append(
            (
                f"{arm.name} end - its step 0",
                {s: _minus(_final(r, key), _step0(r, key)) for s, r in by_seed.items()},
            )
        )
        pairs.append(
            (
                f"{arm.name} end - raw window",
                {
                    s: _minus(_final(r, key), controls.get(s, {}).get(key))
                    for s, r in by_seed.items()
                },
            )
        )
    for a, b in contrasts(list(records)):
        pairs.append(
            (
                f"{a.name} end - {b.name} end",
                {
                    s: _minus(_final(records[a][s], key), _final(records[b][s], key))
                    for s in sorted(set(records[a]) & set(records[b]))
                },
            )
        )
    rows = []
    for name, by_seed in pairs:
        values = np.array([v for v in by_seed.values() if v is not None], dtype=np.float64)
        per_seed = {str(seed): value for seed, value in by_seed.items()}
        row: dict[str, Any] = {"difference": name, "per_seed": per_seed, "n": int(values.size)}
        if values.size >= 2:
            half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
            row.update(mean=float(values.mean()), low=float(values.mean() - half))
            row["high"] = float(values.mean() + half)
        rows.append(row)
    return rows


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def controls_markdown(
    controls: Mapping[int, Mapping[str, float | None]], differences: Sequence[Mapping[str, Any]]
) -> str:
    def number(value: float | None) -> str:
        return "undefined" if value is None else f"{value:.3f}"

    lines = [
        "Raw window (affine probe from the 10-token one-hot input itself, no network), on "
        "each seed's probe episodes:",
        "",
        "| seed | global R² | within-branch R² |",
        "|---|---|---|",
    ]
    for seed, control in controls.items():
        lines.append(
            f"| {seed} | {number(control['r2'])} | {number(control['r2_within_branch'])} |"
        )
    lines += [
        "",
        "Paired differences of within-branch R² (per seed; mean and 95% Student-t interval "
        "across seeds):",
        "",
        "| difference | per seed | mean [95% CI] |",
        "|---|---|---|",
    ]
    for row in differences:
        per_seed = ", ".join(f"s{s} {number(v)}" for s, v in row["per_seed"].items())
        summary = (
            f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
            if "mean" in row
            else "fewer than 2 seeds"
        )
        lines.append(f"| {row['difference']} | {per_seed} | {summary} |")
    return "\n".join(lines) + "\n"


def over_training(folders: Mapping[str, Sequence[Path]]) -> dict[str, list[dict[str, Any]]]:
    """{leaf: one row per probed env-step count: n runs and, per metric, mean/min/max}."""
    table: dict[str, list[dict[str, Any]]] = {}
    for leaf, paths in folders.items():
        by_steps: dict[int, list[Mapping[str, Any]]] = {}
        for path in paths:
            record = json.loads((path / "probe_metrics.json").read_text(encoding="utf-8"))
            for point in record["checkpoints"]:
                by_steps.setdefault(int(point["env_steps"]), []).append(point)
        rows = []
        for steps in sorted(by_steps):
            points = by_steps[steps]
            row: dict[str, Any] = {"env_steps": steps, "n_runs": len(points)}
            for metric in OVER_TRAINING:
                values = np.array(
                    [p[metric] for p in points if p.get(metric) is not None], dtype=np.float64
                )
                row[metric] = (
                    {
                        "mean": float(values.mean()),
                        "min": float(values.min()),
                        "max": float(values.max()),
                    }
                    if values.size
                    else None
                )
            rows.append(row)
        table[leaf] = rows
    return table


def over_training_markdown(table: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    def cell(value: Mapping[str, float] | None) -> str:
        if value is None:
            return "undefined"
        if value["min"] == value["max"]:
            return f"{value['mean']:.3f}"
        return f"{value['mean']:.3f} ({value['min']:.3f}-{value['max']:.3f})"

    lines = [
        "| arm | env steps | runs | greedy accuracy | probe R² | within-branch R² |",
        "|---|---|---|---|---|---|",
    ]
    for leaf, rows in table.items():
        for row in rows:
            lines.append(
                f"| {leaf} | {row['env_steps']:,} | {row['n_runs']} | "
                + " | ".join(cell(row[m]) for m in OVER_TRAINING)
                + " |"
            )
    return "\n".join(lines) + "\n\nMean over runs (min-max) at each probed checkpoint.\n"


def yardstick_rows(arms: Mapping[Arm, Sequence[Path]]) -> list[dict[str, Any]]:
    """One row per run: arm, leaf, seed, run id and its yardstick.json (None when missing)."""
    from experiments.mess3_token_guess import yardstick

    rows = []
    for arm, paths in arms.items():
        for path in sorted(paths):
            seed = (load_manifest(path) or {})["seed"]
            file = path / yardstick.YARDSTICK_FILE
            record = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
            rows.append(
                {
                    "arm": arm.name,
                    "leaf": arm.leaf,
                    "seed": int(seed),
                    "run": path.name,
                    "record": record,
                }
            )
    return rows


def yardstick_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The agent's within-branch R² beside the m-token filters and the untrained baselines."""

    def number(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    def ordered(values: Mapping[str, Any], prefix: str) -> list[Any]:
        """The values of {"<prefix><n>": value} in numeric order of n (JSON sorts keys)."""
        return [values[key] for key in sorted(values, key=lambda k: int(k[len(prefix) :]))]

    lines = [
        "Within-branch R² (branches of equal last 2 tokens) of each run's agent beside exact "
        "filters of only the last m tokens (same episodes, split and affine probe; m <= 2 is "
        "constant within a branch), the m the agent is worth (the first m whose filter "
        "reaches it; interpolated in R²), random ReLU features of the 10-token window (widths), "
        "5 untrained initialisations of the run's own architecture (mean, min to max) and the "
        "windows' MLP on the agent and on the raw window:",
        "",
        "| arm | seed | agent | worth m (interp.) | filter m = 1..6 | within-branch variance "
        "share | random ReLU 64 / 256 / 1024 | untrained x5 | MLP: agent | MLP: raw window |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        record = row["record"]
        if record is None:
            lines.append(
                f"| {row['arm']} | {row['seed']} | missing: `rl-harness analyze "
                f"experiments.mess3_token_guess.{row['leaf']}.experiment {row['run']}` "
                "| | | | | | | |"
            )
            continue
        worth = record["equivalent_memory"]
        interp = worth.get("interpolated_m")
        reach = worth.get("reaches_agent_at_m")
        worth_text = (
            f"> {len(record['filters_r2_within_branch'])}"
            if reach is None
            else f"{reach}" + ("" if interp is None else f" ({interp:.1f})")
        )
        untrained = record["untrained"].get("r2_within_branch")
        untrained_text = (
            "-"
            if not untrained or untrained.get("mean") is None
            else f"{untrained['mean']:.3f} ({untrained['min']:.3f} to {untrained['max']:.3f})"
        )
        filters = ", ".join(number(v) for v in ordered(record["filters_r2_within_branch"], "m"))
        widths = " / ".join(
            number(v) for v in ordered(record["random_features_r2_within_branch"], "width")
        )
        mlp = record["mlp_r2_within_branch"]
        lines.append(
            f"| {row['arm']} | {row['seed']} | {number(record['agent']['r2_within_branch'])} | "
            f"{worth_text} | {filters} | "
            f"{record['within_branch_variance_fraction']['held_out']:.4f} | {widths} | "
            f"{untrained_text} | {number(mlp.get('agent'))} | {number(mlp.get('raw_window'))} |"
        )
    return "\n".join(lines) + "\n"


def ceilings_markdown(values: Mapping[str, float]) -> str:
    return (
        "| reference (exact, mixed-state presentation) | value |\n|---|---|\n"
        f"| Bayes-optimal accuracy, 10-token window | {values['bayes_optimal_accuracy']:.4f} |\n"
        f"| Bayes-optimal accuracy, newest token only | {values['newest_token_accuracy']:.4f} |\n"
        f"| uniform guess | {values['uniform_accuracy']:.4f} |\n"
        f"| H(X11 given X1..X10), bits | {values['window_entropy_bits']:.4f} |\n"
    )


def plot_over_training(path: Path, table: Mapping[str, Sequence[Mapping[str, Any]]]) -> Path:
    """over_training.png: mean (band: min-max over runs) of each metric against env steps."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2))
    axes = fig.subplots(1, len(OVER_TRAINING))
    for index, (leaf, rows) in enumerate(table.items()):
        x = np.array([max(row["env_steps"], 1) for row in rows], dtype=np.float64)
        for ax, metric in zip(axes, OVER_TRAINING, strict=True):
            values = [row[metric] for row in rows]
            mean = np.array([v["mean"] if v else np.nan for v in values])
            low = np.array([v["min"] if v else np.nan for v in values])
            high = np.array([v["max"] if v else np.nan for v in values])
            ax.plot(x, mean, "o-", color=f"C{index}", label=leaf)
            ax.fill_between(x, low, high, color=f"C{index}", alpha=0.2)
    values = shared.ceilings()
    axes[0].axhline(values["bayes_optimal_accuracy"], ls="--", color="k", lw=1, label="Bayes")
    axes[0].axhline(values["newest_token_accuracy"], ls=":", color="k", lw=1, label="newest token")
    for ax, metric in zip(axes, OVER_TRAINING, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("env steps (step 0 at 1)")
        ax.set_title(metric.replace("_", " "))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


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
    every = [path for paths in folders.values() for path in paths]
    # Runs of earlier training code are shown over training beside the current ones, never
    # pooled or paired with them (smoke runs: all current).
    current, earlier = (every, []) if context.smoke else split_by_code(every)
    differences = library_source_differences(current)
    arms = arm_folders(folders, earlier)
    current_arms = {arm: paths for arm, paths in arms.items() if not arm.earlier_code}
    comparison = compare_arms(
        current_arms, allow_mixed=context.smoke or differences["same_code_for_training"]
    )
    files = write_comparison(comparison, context.results_dir)
    table = over_training({arm.name: paths for arm, paths in arms.items()})
    records = seed_records(current_arms)
    controls = window_controls(records)
    paired = paired_differences(records, controls)
    run_arms = {path.name: arm.name for arm, paths in arms.items() for path in paths}
    write_json(context.results_dir / "arms.json", run_arms)
    write_json(
        context.results_dir / "controls.json",
        {"raw_window": {str(s): c for s, c in controls.items()}, "paired": paired},
    )
    yardsticks = yardstick_rows(arms)
    write_json(context.results_dir / "yardstick.json", yardsticks)
    write_json(context.results_dir / "over_training.json", table)
    plot_over_training(context.results_dir / "over_training.png", table)
    study_table = context.results_dir / "study_table.md"
    study_table.write_text(
        "# MESS3 token guess: PPO and supervised next-token training\n\n"
        + ceilings_markdown(shared.ceilings())
        + library_markdown(differences)
        + arms_markdown(arms)
        + budget_markdown(budget, other_budgets)
        + "\n## At the end of training\n\n"
        + comparison_markdown(comparison)
        + "\n## Controls and paired differences\n\n"
        + controls_markdown(controls, paired)
        + "\n## Memory yardstick\n\n"
        + yardstick_markdown(yardsticks)
        + "\n## Over training\n\n"
        + over_training_markdown(table),
        encoding="utf-8",
    )
    # result.json: each number named once; budgets, library files and files written: notes.
    results = Results()
    results.add("runs", len(comparison.runs))
    for arm in comparison.arms:
        results.add(f"arms/{arm.arm}", arm.n_runs)
    results.add("bayes_optimal_accuracy", shared.ceilings()["bayes_optimal_accuracy"])
    for name in ("greedy_accuracy", "probe_r2_within_branch"):
        for arm in comparison.arms:
            results.add(f"{name}/{arm.arm}", arm.metrics[name].mean)
    for commit, ids in differences["commits"].items():
        results.add(f"library_commits/{commit}", len(ids))
    results.notes |= {
        "budget": budget,
        "left_out_other_budgets": other_budgets,
        "library_files_differing": differences["differing_files"],
        "files": [path.name for path in [study_table, *files]]
        + [
            "arms.json",
            "controls.json",
            "yardstick.json",
            "over_training.json",
            "over_training.png",
        ],
        "earlier_code_runs": sorted(path.name for path in earlier),
    }
    return results


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
