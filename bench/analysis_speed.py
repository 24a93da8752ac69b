"""The flagship's in-run analysis, old library against this checkout, side by side.

Runs `experiments.mess3_belief_geometry.analysis.analyze` (the `reward_only` leaf's call:
interventions on) on one finished run's final checkpoint, once with the library and study
at --baseline-ref (default c0c881e: main before issue 53 item 2 was merged; checked out with
`git worktree add --detach` under /tmp, removed afterwards, and put first on PYTHONPATH) and
once with this checkout, each in its own process on a fresh copy of the run's results
folder, OMP_NUM_THREADS=1 unless --threads (the study's runs set 1). Prints each side's wall
time and seconds per stage (probe_metrics.json `timings`; an old side that records none, from
its progress lines, one phase per announced step), the stages grouped where both sides do
the same work with the ratio old / new of each and of the total, and how the two records'
numbers agree (every numeric leaf of probe_metrics.json, yardstick.json and
interventions.json: equal to 1e-9, within 1e-3 relative (float rounding: the 64-step
replays, the batched window fits), or different, the largest first; see docs/performance.md
for which computations changed and why they are the same in distribution).

    # a run to analyse (any reward_only run with checkpoints; a smoke run is enough: the
    # analysis sizes come from --budget / --set, not from the run):
    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment --smoke \
        --set iterations=64 --results-dir /tmp/ab --artifacts-dir /tmp/ab --run-id ab
    # the comparison at the CPU budget's analysis sizes (the old side alone ~40 min on 2
    # quiet cores; see docs/performance.md):
    .venv/bin/python bench/analysis_speed.py /tmp/ab/ab --budget cpu
    # or, without training, a finished run of 6 saved untrained agents built first:
    .venv/bin/python bench/analysis_speed.py /tmp/ab-run --make-run 6 --budget cpu

`--sides new` runs this checkout only (its stage table); `--set KEY=VALUE` changes one
analysis size (e.g. --set probe_episodes=64 for a quick look). No timing assertion anywhere:
the numbers are for the coordinator's quiet measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINE_REF = "c0c881e"  # main before issue 53 item 2 was merged
RECORDS = ("probe_metrics.json", "yardstick.json", "interventions.json")

# The child: one analysis of a copy of the run, the library on PYTHONPATH first.
CHILD = r"""
import dataclasses, importlib, json, sys, time
from pathlib import Path
import torch
results_dir, budget, overrides = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
from rl_harness import RunContext
from rl_harness.analysis import RunArtifacts
from experiments.mess3_belief_geometry import analysis
recipe = importlib.import_module("experiments.mess3_belief_geometry.reward_only.experiment")
plan = dataclasses.replace(recipe.BUDGETS[budget], **overrides)
run = RunArtifacts.open(results_dir)
context = RunContext(
    experiment_module=recipe.__name__, experiment_dir=Path(recipe.__file__).parent,
    results_dir=results_dir, artifacts_dir=results_dir, run_id=run.run_id,
    seed=run.seed if run.seed is not None else 42, budget=budget, settings=plan,
)
started = time.perf_counter()
record = analysis.analyze(
    context, label="reward_only", module_spec=recipe.module_spec(), plan=plan, interventions=True
)
wall = time.perf_counter() - started
import rl_harness
print("BENCH " + json.dumps({"wall_s": wall, "timings": record.get("timings"),
                             "study": analysis.__file__, "library": rl_harness.__file__}),
      flush=True)
"""


# The old analysis' phases, from the first words of its progress lines (c0c881e's
# analysis.py, interventions.py and incremental.py): the stage each line starts.
OLD_PHASES = (
    ("greedy rollouts of the trained agent", "rollouts"),
    ("untrained control: replaying", "replays"),
    ("affine probes", "probes"),
    ("window baselines k", "windows"),
    ("incremental R²: windows", "incremental_r2"),
    ("per-layer probes", "layers"),
    ("probes over training", "over_training"),
    ("controls on data the agent did not choose", "controls_by_data"),
    ("interventions at", "interventions"),
    ("memory yardstick", "yardstick"),
    ("wrote probe_metrics.json", None),
)
# Stages grouped where both sides do the same work (the new one collects every data set and
# replays every control in its first stages, which the old did inside controls_by_data, and
# scores the agent's controls in one call): (old phases, new stages).
GROUPS = {
    "rollouts, replays, probes, controls, windows, incremental R², layers, over training, "
    "controls by data": (
        (
            "rollouts",
            "replays",
            "probes",
            "windows",
            "incremental_r2",
            "layers",
            "over_training",
            "controls_by_data",
        ),
        (
            "load",
            "rollouts",
            "replays",
            "probes",
            "controls",
            "incremental_r2",
            "layers",
            "over_training",
            "controls_by_data",
        ),
    ),
    "interventions": (("interventions",), ("interventions",)),
    "yardstick and figures": (("yardstick",), ("yardstick", "figures")),
}


def baseline_tree(ref: str, into: Path) -> Path:
    """The repository at `ref`, checked out as a detached git worktree at `into` (removed by
    `remove_tree`)."""
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), ref],
        check=True,
        capture_output=True,
    )
    return into


def remove_tree(tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True
    )
    subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def old_phases(lines: str) -> dict[str, float]:
    """{phase: seconds} of an old analysis from its progress lines ("[analysis LABEL  12.3s]
    message"): each phase from the line that starts it to the line that starts the next."""
    marks: list[tuple[float, str | None]] = []
    for line in lines.splitlines():
        if not line.startswith("[analysis") or "s] " not in line:
            continue
        stamp, message = line.split("s] ", 1)
        for prefix, phase in OLD_PHASES:
            if message.startswith(prefix):
                marks.append((float(stamp.split()[-1]), phase))
                break
    out: dict[str, float] = {}
    for (start, phase), (end, _) in zip(marks, marks[1:], strict=False):
        if phase is not None:
            out[phase] = out.get(phase, 0.0) + end - start
    return out


def run_side(
    name: str,
    tree: Path,
    run_dir: Path,
    budget: str,
    overrides: dict,
    scratch: Path,
    threads: int = 1,
) -> dict:
    """One analysis in its own process on a fresh copy of `run_dir`; its BENCH line, the
    copy's path and the console lines."""
    copy = scratch / f"{name}-{run_dir.name}"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(run_dir, copy)
    for record in RECORDS:  # the run's own analysis files go: each side writes its own
        (copy / record).unlink(missing_ok=True)
    env = os.environ | {
        "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree / 'examples' / 'rl-experiments'}",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(copy), budget, json.dumps(overrides)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(scratch),
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: the analysis failed:\n{done.stderr[-3000:]}")
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("BENCH "))
    out = json.loads(line[len("BENCH ") :])
    out |= {"process_s": time.perf_counter() - started, "copy": copy, "lines": done.stdout}
    return out


MAKE_RUN = r"""
import json, sys
from pathlib import Path
import torch
from experiments.mess3_belief_geometry import probing
from experiments.mess3_belief_geometry.reward_only import experiment as recipe
root, n_checkpoints = Path(sys.argv[1]), int(sys.argv[2])
make_env = probing.probe_env_factory(False)
results, artifacts = root / "results" / "run-1", root / "artifacts" / "run-1"
results.mkdir(parents=True)
rows = []
for i in range(n_checkpoints):
    agent = probing.untrained_module(recipe.module_spec(), make_env, seed=100 + i)
    with torch.no_grad():  # a policy head that moves the greedy action off the middle
        for parameter in agent.pi.parameters():
            parameter.mul_(30.0)
    path = f"checkpoints/iter_{i:06d}"
    agent.save_to_path(str(artifacts / path / "learner_group/learner/rl_module/default_policy"))
    (artifacts / path / "rllib_checkpoint.json").write_text("{}")
    rows.append({"env_steps": 0 if i == 0 else 32768 * 2 ** (i - 1), "iteration": i,
                 "path": path, "reasons": ["log"]})
(results / "checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
(results / "run_manifest.json").write_text(json.dumps({
    "run_id": "run-1", "status": "completed", "seed": 42,
    "experiment": {"module": "experiments.mess3_belief_geometry.reward_only.experiment"},
    "options": {"seed": 42}, "artifacts": {"local": str(artifacts), "remote": None},
}))
(results / "summary.json").write_text(json.dumps(
    {"run_id": "run-1", "seed": 42, "final_checkpoint": rows[-1]["path"]}))
print(results)
"""


def make_run(root: Path, n_checkpoints: int) -> Path:
    """A finished reward_only run without training (no Ray): `n_checkpoints` saved untrained
    agents of the study's architecture (policy heads scaled so greedy actions vary), at the
    CPU schedule's env steps (0, then doublings of 32,768), the last one final."""
    env = os.environ | {
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO / 'examples' / 'rl-experiments'}"
    }
    done = subprocess.run(
        [sys.executable, "-c", MAKE_RUN, str(root), str(n_checkpoints)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"make-run failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def numeric_leaves(value: Any, path: str = "") -> dict[str, float]:
    """{json path: number} of every int/float leaf (bools and wall times left out)."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("wall_time_s", "analysis_wall_time_s", "timings", "checkpoint"):
                continue
            out |= numeric_leaves(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out |= numeric_leaves(item, f"{path}/{index}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out[path] = float(value)
    return out


def compare_records(old: Path, new: Path) -> list[str]:
    """Lines: per record file, how many numeric leaves are equal (to 1e-9 relative), how many
    differ (largest differences first) and which are only in one."""
    lines = []
    for name in RECORDS:
        if not (old / name).exists() or not (new / name).exists():
            lines.append(f"{name}: missing on one side")
            continue
        a = numeric_leaves(json.loads((old / name).read_text()))
        b = numeric_leaves(json.loads((new / name).read_text()))
        common = sorted(set(a) & set(b))
        close, diffs = 0, []
        for key in common:
            x, y = a[key], b[key]
            if (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9 * max(1, abs(x)):
                continue
            if abs(x - y) <= 1e-3 * max(1, abs(x)):
                close += 1
            else:
                diffs.append((abs(x - y), key, x, y))
        diffs.sort(reverse=True)
        equal = len(common) - close - len(diffs)
        lines.append(
            f"{name}: of {len(common)} numbers in both, {equal} equal (1e-9), {close} within "
            f"1e-3 relative, {len(diffs)} differ more; only old {len(set(a) - set(b))}, only new "
            f"{len(set(b) - set(a))}"
        )
        for gap, key, x, y in diffs[:12]:
            lines.append(f"    {key}: {x:.6g} -> {y:.6g} (|d| {gap:.3g})")
    return lines


def report(results: dict[str, dict], baseline_ref: str) -> None:
    """Seconds per stage of each side, the groups both sides share with old / new, the
    records compared."""
    stages = {}
    if "new" in results and results["new"]["timings"]:
        stages["new"] = results["new"]["timings"]["stages_s"]
    if "old" in results:
        # A baseline with staged analysis records its own seconds per stage; an older one
        # (c0c881e) only says them in its progress lines.
        timings = results["old"]["timings"]
        stages["old"] = timings["stages_s"] if timings else old_phases(results["old"]["lines"])
    for side, table in stages.items():
        name = "this checkout" if side == "new" else f"old ({baseline_ref})"
        print(f"\n{name}, seconds per stage (wall {results[side]['wall_s']:.1f} s):")
        for stage, seconds in table.items():
            print(f"  {stage:<18} {seconds:8.1f}")
    if "old" in results and "new" in results:
        print("\nthe same work on both sides, seconds (old / new):")
        staged = results["old"]["timings"] is not None
        # Two staged analyses share their stage names: each stage is its own group.
        groups = {n: ((n,), (n,)) for n in stages["new"]} if staged else GROUPS
        for group, (old_names, new_names) in groups.items():
            old = sum(stages["old"].get(n, 0.0) for n in old_names)
            new = sum(stages.get("new", {}).get(n, 0.0) for n in new_names)
            ratio = f"{old / new:6.2f}x" if new > 0 else "     -"
            print(f"  {old:8.1f} {new:8.1f} {ratio}  {group}")
        old_wall, new_wall = results["old"]["wall_s"], results["new"]["wall_s"]
        print(f"  {old_wall:8.1f} {new_wall:8.1f} {old_wall / new_wall:6.2f}x  the whole analysis")
        print("\nrecords, old against new:")
        for line in compare_records(results["old"]["copy"], results["new"]["copy"]):
            print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run",
        type=Path,
        help="results/<run-id> of a reward_only run (with --make-run: a new "
        "folder to build one in)",
    )
    parser.add_argument(
        "--make-run",
        type=int,
        metavar="N",
        help="first build a finished run of N saved untrained agents (no training) in RUN",
    )
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument("--budget", default="cpu", help="whose analysis sizes (default cpu)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sides", default="old,new", help="old,new | new | old")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OMP/MKL threads of each side's process (default 1, as the study's runs): this "
        "checkout's fits and 64-step replays use them, its acting stays on 1; the old "
        "analysis ran torch on 1 thread throughout",
    )
    args = parser.parse_args(argv)
    if args.make_run:
        if args.run.exists():
            print(f"analysis_speed: error: {args.run} exists", file=sys.stderr)
            return 2
        args.run = make_run(args.run.resolve(), args.make_run)
        print(f"built {args.run} ({args.make_run} checkpoints)")
    if not (args.run / "run_manifest.json").is_file():
        print(f"analysis_speed: error: {args.run} has no run_manifest.json", file=sys.stderr)
        return 2
    overrides: dict[str, int] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = int(value)
    sides = [s for s in args.sides.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="analysis-speed-") as tmp:
        scratch = Path(tmp)
        trees = {"new": REPO}
        if "old" in sides:
            trees["old"] = baseline_tree(args.baseline_ref, (scratch / "old-tree").resolve())
        try:
            results = {}
            for side in sides:
                print(
                    f"{side}: analysing {args.run} at {args.budget} {overrides or ''}", flush=True
                )
                results[side] = run_side(
                    side, trees[side], args.run, args.budget, overrides, scratch, args.threads
                )
                print(
                    f"{side}: {results[side]['wall_s']:.1f} s (library {results[side]['library']})",
                    flush=True,
                )
            report(results, args.baseline_ref)
        finally:
            if "old" in trees:
                remove_tree(trees["old"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
