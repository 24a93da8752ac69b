"""The study README's generated tables, from the committed run records alone.

Every table between `<!-- report:NAME -->` and `<!-- /report:NAME -->` in the study README is
written by this module from the runs' probe_metrics.json, yardstick.json and run_manifest.json;
a fast test (tests/study/test_token_guess_report.py) regenerates them and fails when the
README differs. Rewrite the README's blocks after new runs land:

    uv run python -m experiments.mess3_token_guess.report --write
    uv run python -m experiments.mess3_token_guess.report --check   # exit 1 on a difference

Statistics (the seed is the unit; `rl_harness.analysis.seed_statistics`): per-seed values,
their mean with a 95% Student-t interval and a two-sided t-test of the paired differences;
each table's family of tests is Holm-corrected and says how many tests it holds. Untrained
networks are counted as distinct networks (two leaves with the same seed and init scheme
share them) and never pooled across init schemes. A "worth m tokens" reading is made only
where the exact filter's within-branch R² rises with m.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_harness import Results, read_results
from rl_harness.analysis import holm_adjust, readme_main, seed_test

STUDY_DIR = Path(__file__).resolve().parent
README = STUDY_DIR / "README.md"

# The runs the README's results cite: CPU budget, library dc12640, 2026-12-06, seeds 0, 1, 2.
CPU_RUNS: dict[str, tuple[str, ...]] = {
    "ppo": (
        "20261206T035129Z-3c7e9d69",
        "20261206T040902Z-ccda8cb0",
        "20261206T043940Z-fab4a72c",
    ),
    "supervised": (
        "20261206T035128Z-354e4522",
        "20261206T042302Z-af38ab56",
        "20261206T043940Z-d90ebdcb",
    ),
    "ppo_default_init": (
        "20261206T040723Z-723a5a12",
        "20261206T042439Z-37151a1d",
        "20261206T044554Z-0dd33242",
    ),
    # Trained 2026-12-07 at library 719409e (the other arms: dc12640, the day before).
    "ppo_no_kl": (
        "20261207T130655Z-19ac27a4",
        "20261207T130701Z-725cda5b",
        "20261207T130721Z-d54ffe09",
    ),
}
# The one FULL-budget run (ppo seed 0), read beside the CPU runs, never pooled with them.
FULL_RUN = ("ppo", "20261206T041106Z-7f28218a")
# Runs of one untrained seed on different CPUs (the ppo_no_kl runs on an AMD EPYC, the others
# on an Intel Xeon) score the same networks equal to ~1e-6 relative (float rounding), not bit
# for bit; they are the same networks when they agree to this.
UNTRAINED_RTOL = 1e-5
# Paired contrasts over training (first minus second, seed by seed, the same probe episodes).
CONTRASTS = (("supervised", "ppo"), ("ppo", "ppo_default_init"), ("ppo_no_kl", "ppo"))


@dataclass(frozen=True)
class StudyRun:
    arm: str
    seed: int
    run_id: str
    manifest: Mapping[str, Any]
    config: Mapping[str, Any]
    result: Results  # result.json's named metrics (an older nested one read by key path)
    probe: Mapping[str, Any]
    yardstick: Mapping[str, Any]


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_run(folder: Path) -> StudyRun:
    """One completed run's records (`<study>/<leaf>/results/<run-id>`); else an error."""
    manifest = _read(folder / "run_manifest.json")
    if manifest.get("status") != "completed":
        raise FileNotFoundError(f"{folder}: not a completed run")
    return StudyRun(
        arm=folder.parent.parent.name,
        seed=int(manifest["seed"]),
        run_id=folder.name,
        manifest=manifest,
        config=_read(folder / "config.json"),
        result=read_results(folder),
        probe=_read(folder / "probe_metrics.json"),
        yardstick=_read(folder / "yardstick.json"),
    )


def load_runs(runs: Mapping[str, Sequence[str]], root: Path = STUDY_DIR) -> list[StudyRun]:
    """The named runs' records, arm by arm in seed order; a missing run is an error."""
    loaded = [read_run(root / arm / "results" / rid) for arm, ids in runs.items() for rid in ids]
    return sorted(loaded, key=lambda run: (list(runs).index(run.arm), run.seed))


def load_full(root: Path = STUDY_DIR) -> StudyRun:
    arm, run_id = FULL_RUN
    return read_run(root / arm / "results" / run_id)


def _arms(runs: Sequence[StudyRun]) -> list[str]:
    return list(dict.fromkeys(run.arm for run in runs))


def _init(run: StudyRun) -> str:
    init = run.config["module"]["init"]
    std = f" {init['init_std']}" if init.get("init_std") is not None else ""
    return f"{init['init']}{std}, pi x{init['pi_output_scale']:g}, vf x{init['vf_output_scale']:g}"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _range(values: Sequence[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def _interval(values: Sequence[float]) -> tuple[str, float | None]:
    test = seed_test(values)
    if test.low is None or test.high is None:
        return f"{test.mean:+.3f}", None
    return f"{test.mean:+.3f} [{test.low:+.3f}, {test.high:+.3f}]", test.p_value


def _competitors(run: StudyRun) -> dict[str, float]:
    """Each competing explanation's within-branch R² on the run's own probe split."""
    y = run.yardstick
    rf = y["random_features_r2_within_branch"]
    return {
        "raw window, affine": y["raw_window_affine"]["r2_within_branch"],
        "untrained (mean of 5)": y["untrained"]["r2_within_branch"]["mean"],
        "64 random ReLU": rf["width64"],
        "256 random ReLU": rf["width256"],
        "1024 random ReLU": rf["width1024"],
        "raw-window MLP": y["mlp_r2_within_branch"]["raw_window"],
    }


def competitors_table(runs: Sequence[StudyRun]) -> str:
    """Every competing explanation beside every run, and the ones the agent falls below."""
    names = list(_competitors(runs[0]))
    lines = [
        "Within-branch R² (equal last 2 tokens, held-out steps of the run's own probe "
        "episodes) of the agent and of each competing explanation on the same steps "
        "(yardstick.json). The last column names the competitors the agent does not beat.",
        "",
        "| arm | seed | agent | " + " | ".join(names) + " | MLP on the agent | agent at or below |",
        "|---|---|---|" + "---|" * len(names) + "---|---|",
    ]
    for run in runs:
        agent = run.yardstick["agent"]["r2_within_branch"]
        values = _competitors(run)
        below = [name for name, value in values.items() if value >= agent]
        lines.append(
            f"| {run.arm} | {run.seed} | {agent:.3f} | "
            + " | ".join(f"{values[name]:.3f}" for name in names)
            + f" | {run.yardstick['mlp_r2_within_branch']['agent']:.3f} | "
            + f"{', '.join(below) if below else 'none'} |"
        )
    lines += ["", "Per arm (range over seeds):", ""]
    lines += [
        "| arm | agent | " + " | ".join(names) + " | agent at or below (seeds) |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for arm in _arms(runs):
        arm_runs = [run for run in runs if run.arm == arm]
        agents = [run.yardstick["agent"]["r2_within_branch"] for run in arm_runs]
        cols = [_range([_competitors(run)[name] for run in arm_runs]) for name in names]
        below = {
            name: sum(_competitors(run)[name] >= a for run, a in zip(arm_runs, agents, strict=True))
            for name in names
        }
        listed = ", ".join(f"{name} ({n} of {len(arm_runs)})" for name, n in below.items() if n)
        lines.append(
            f"| {arm} | {_range(agents)} | " + " | ".join(cols) + f" | {listed or 'none'} |"
        )
    return "\n".join(lines)


def untrained_table(runs: Sequence[StudyRun]) -> str:
    """Distinct untrained networks per init scheme: runs of two leaves with the same seed
    and init scheme draw the same untrained networks, so they count once."""
    distinct: dict[str, dict[tuple[int, ...], list[float]]] = {}
    leaves: dict[str, set[str]] = {}
    for run in runs:
        untrained = run.yardstick["untrained"]
        scheme = _init(run)
        seeds = tuple(untrained["seeds"])
        values = untrained["r2_within_branch"]["values"]
        known = distinct.get(scheme, {}).get(seeds)
        if known is not None and not all(
            abs(a - b) <= UNTRAINED_RTOL * abs(a) for a, b in zip(known, values, strict=True)
        ):
            raise ValueError(f"{run.run_id}: same untrained seeds {seeds}, other R² values")
        if known is None:  # the same networks count once (the first run's values kept)
            distinct.setdefault(scheme, {})[seeds] = values
        leaves.setdefault(scheme, set()).add(run.arm)
    lines = [
        "Untrained networks of the agent's architecture (yardstick.json, 5 per run, the "
        "run's own probe split), counted as distinct networks by their seeds and init scheme "
        "and never pooled across schemes:",
        "",
        "| init scheme | leaves | runs | distinct networks | within-branch R²: mean | range |",
        "|---|---|---|---|---|---|",
    ]
    for scheme, by_seeds in distinct.items():
        values = [v for vs in by_seeds.values() for v in vs]
        n_runs = sum(_init(run) == scheme for run in runs)
        lines.append(
            f"| {scheme} | {', '.join(sorted(leaves[scheme]))} | {n_runs} | {len(values)} | "
            f"{sum(values) / len(values):.3f} | {min(values):.3f}-{max(values):.3f} |"
        )
    return "\n".join(lines)


def memory_reading(filters: Mapping[str, float], agent: float) -> str:
    """Where the agent's within-branch R² falls on the m-token filters' scale: 'between m-1
    and m tokens' (filter m-1 < agent < filter m), read only where the filters rise with m."""
    ms = sorted(int(key[1:]) for key in filters)
    values = [filters[f"m{m}"] for m in ms]
    for i in range(1, len(values)):
        if values[i] < values[i - 1]:
            return f"undefined (the filter falls from m = {ms[i - 1]} to {ms[i]})"
    if agent <= values[0]:
        return f"at most {ms[0]} token"
    for i in range(1, len(values)):
        if agent == values[i]:
            return f"{ms[i]} tokens"
        if agent < values[i]:
            return f"between {ms[i - 1]} and {ms[i]} tokens"
    return f"more than {ms[-1]} tokens"


def memory_table(runs: Sequence[StudyRun]) -> str:
    lines = [
        "The agent's within-branch R² on the scale of exact filters that see only the last m "
        "tokens (stationary law, the same steps and probe; yardstick.json), read only where "
        "the filter rises with m:",
        "",
        "| arm | seed | agent | filter m = 3 | m = 4 | m = 5 | m = 6 | worth |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        agent = run.yardstick["agent"]["r2_within_branch"]
        f = run.yardstick["filters_r2_within_branch"]
        lines.append(
            f"| {run.arm} | {run.seed} | {agent:.3f} | {f['m3']:.3f} | {f['m4']:.3f} | "
            f"{f['m5']:.3f} | {f['m6']:.3f} | {memory_reading(f, agent)} |"
        )
    return "\n".join(lines)


def _curve(run: StudyRun) -> dict[int, float]:
    return {int(c["env_steps"]): c["r2_within_branch"] for c in run.probe["checkpoints"]}


def over_training_table(runs: Sequence[StudyRun]) -> str:
    """The paired differences of within-branch R² at every checkpoint, per seed, with their
    interval; Holm over every test of the table. Step 0 of two leaves with the same seed
    and init is the same network: its difference is 0 by construction and not tested."""
    rows: list[tuple[str, int, list[float], str, float | None]] = []
    for first, second in CONTRASTS:
        a = {run.seed: run for run in runs if run.arm == first}
        b = {run.seed: run for run in runs if run.arm == second}
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        same_init = all(_init(a[s]) == _init(b[s]) for s in seeds)
        steps = sorted(set.intersection(*(set(_curve(a[s])) & set(_curve(b[s])) for s in seeds)))
        for step in steps:
            values = [_curve(a[s])[step] - _curve(b[s])[step] for s in seeds]
            if step == 0 and same_init:
                rows.append((f"{first} - {second}", step, values, "0 (the same network)", None))
                continue
            text, p = _interval(values)
            rows.append((f"{first} - {second}", step, values, text, p))
    adjusted = holm_adjust([row[4] for row in rows])
    tested = sum(row[4] is not None for row in rows)
    lines = [
        "Paired differences of within-branch R² at every checkpoint (the same probe episodes "
        f"per seed), mean [95% t-interval], t-test p, Holm over the {tested} tests of this "
        "table:",
        "",
        "| difference | env steps | per seed (0, 1, 2) | mean [95% CI] | p | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    for (name, step, values, text, p), p_holm in zip(rows, adjusted, strict=True):
        per_seed = ", ".join(f"{v:+.3f}" for v in values)
        lines.append(f"| {name} | {step:,} | {per_seed} | {text} | {_p(p)} | {_p(p_holm)} |")
    return "\n".join(lines)


def _settings(run: StudyRun) -> dict[str, Any]:
    return dict(run.manifest["budget"]["settings"])


def full_settings_table(runs: Sequence[StudyRun], full: StudyRun) -> str:
    """The FULL run's recorded settings that differ from every CPU run's."""
    cpu = {json.dumps(_settings(run), sort_keys=True) for run in runs}
    if len(cpu) != 1:
        raise ValueError("the CPU runs differ in their recorded budget settings")
    base, own = _settings(runs[0]), _settings(full)
    lines = [
        f"The FULL run (`{full.arm}/results/{full.run_id}`, seed {full.seed}) against the CPU "
        "runs, every recorded budget setting that differs (run_manifest.json `budget`):",
        "",
        "| setting | CPU runs | FULL run |",
        "|---|---|---|",
    ]
    for key in sorted(base.keys() | own.keys()):
        if base.get(key) != own.get(key):
            lines.append(f"| `{key}` | {base.get(key)} | {own.get(key)} |")
    return "\n".join(lines)


# ------------------------------------------------------------ per run, across seeds, over training
def runs_table(runs: Sequence[StudyRun]) -> str:
    """One row per run (result.json; training minutes from its `training_wall_time_s`)."""
    lines = [
        "| arm | init | seed | run | greedy accuracy | of Bayes-optimal | probe R² | within-branch "
        "R² | step 0 within-branch | training min |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        r = run.result.value  # each metric of the run's result.json, by name
        lines.append(
            f"| {run.arm} | {_init(run)} | {run.seed} | `{run.run_id}` | "
            f"{r('greedy_accuracy'):.4f} | {r('fraction_of_bayes_optimal'):.3f} | "
            f"{r('probe_r2'):.4f} | {r('probe_r2_within_branch'):.3f} | "
            f"{r('step0_probe_r2_within_branch'):.3f} | {r('training_wall_time_s') / 60:.1f} |"
        )
    return "\n".join(lines)


def _mean_interval(values: Sequence[float], digits: int) -> str:
    test = seed_test(values)
    if test.low is None or test.high is None:
        return f"{test.mean:.{digits}f}"
    return f"{test.mean:.{digits}f} [{test.low:.{digits}f}, {test.high:.{digits}f}]"


def seeds_table(runs: Sequence[StudyRun]) -> str:
    """Per arm at the end: mean [95% Student-t interval] over its seeds."""
    lines = [
        "| arm | seeds | within-branch R² | greedy accuracy |",
        "|---|---|---|---|",
    ]
    for arm in _arms(runs):
        results = [run.result for run in runs if run.arm == arm]
        lines.append(
            f"| {arm} | {len(results)} | "
            f"{_mean_interval([r.value('probe_r2_within_branch') for r in results], 3)} | "
            f"{_mean_interval([r.value('greedy_accuracy') for r in results], 4)} |"
        )
    return "\n".join(lines)


def gains_table(runs: Sequence[StudyRun]) -> str:
    """Each arm's paired within-branch gains at the end: over its own step-0 network and over
    the raw window read by the same affine probe (yardstick.json `raw_window_affine`), per
    seed, mean [95% t-interval] and t-test p; each a single test, not corrected."""
    lines = [
        "| difference | per seed | mean [95% CI] | p |",
        "|---|---|---|---|",
    ]
    for arm in _arms(runs):
        arm_runs = [run for run in runs if run.arm == arm]
        end = [run.result.value("probe_r2_within_branch") for run in arm_runs]
        for label, other in (
            ("its step 0", [run.result.value("step0_probe_r2_within_branch") for run in arm_runs]),
            (
                "raw window, affine",
                [run.yardstick["raw_window_affine"]["r2_within_branch"] for run in arm_runs],
            ),
        ):
            values = [a - b for a, b in zip(end, other, strict=True)]
            text, p = _interval(values)
            per_seed = ", ".join(f"{v:+.3f}" for v in values)
            lines.append(f"| {arm}: end - {label} | {per_seed} | {text} | {_p(p)} |")
    return "\n".join(lines)


def curve_table(runs: Sequence[StudyRun]) -> str:
    """Within-branch R² at every checkpoint all of an arm's runs have: mean over seeds
    (min-max), from probe_metrics.json `checkpoints`."""
    arms = _arms(runs)
    curves = {arm: [_curve(run) for run in runs if run.arm == arm] for arm in arms}
    steps = sorted(set.intersection(*(set(c) for cs in curves.values() for c in cs)))
    lines = ["| env steps | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for step in steps:
        cells = []
        for arm in arms:
            values = [curve[step] for curve in curves[arm]]
            mean = sum(values) / len(values)
            cells.append(f"{mean:.3f} ({min(values):.3f}-{max(values):.3f})")
        lines.append(f"| {step:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


TABLES: dict[str, Callable[[Sequence[StudyRun], StudyRun], str]] = {
    "runs": lambda runs, full: runs_table(runs),
    "seeds": lambda runs, full: seeds_table(runs),
    "gains": lambda runs, full: gains_table(runs),
    "curve": lambda runs, full: curve_table(runs),
    "competitors": lambda runs, full: competitors_table(runs),
    "untrained": lambda runs, full: untrained_table(runs),
    "memory": lambda runs, full: memory_table(runs),
    "over_training": lambda runs, full: over_training_table(runs),
    "full_settings": full_settings_table,
}


def blocks(runs: Sequence[StudyRun], full: StudyRun) -> dict[str, str]:
    return {name: table(runs, full) for name, table in TABLES.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the README's generated tables; `--check` exits 1 when they differ."""
    return readme_main(
        README,
        lambda: blocks(load_runs(CPU_RUNS), load_full()),
        prog="python -m experiments.mess3_token_guess.report",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
