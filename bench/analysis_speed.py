"""The flagship's in-run analysis, old library against this checkout, side by side.

Runs `experiments.mess3_belief_geometry.analysis.analyze` (the `reward_only` leaf's call:
interventions on) on one finished run's final checkpoint, once with the library and study
at --baseline-ref (default af63730, before issue 53 item 2; unpacked with `git archive` into a
temporary folder and put first on PYTHONPATH) and once with this checkout, each in its own
process on a fresh copy of the run's results folder, OMP_NUM_THREADS=1 unless --threads
(the study's runs set 1). Prints each side's wall time, this checkout's seconds per stage
(probe_metrics.json `timings`), the ratio old / new, and how the two records' numbers differ
(every numeric leaf of probe_metrics.json, yardstick.json and interventions.json: how many
are equal, how many differ and by how much; see the module docstring of the study's
analysis.py and docs/performance.md for why some differ).

    # a run to analyse (any reward_only run with checkpoints; a smoke run is enough: the
    # analysis sizes come from --budget / --set, not from the run):
    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment --smoke \
        --set iterations=64 --results-dir /tmp/ab --artifacts-dir /tmp/ab --run-id ab
    # the comparison at the CPU budget's analysis sizes (~35 min on 2 quiet cores: the old
    # side ~30 min, this checkout a few):
    .venv/bin/python bench/analysis_speed.py /tmp/ab/ab --budget cpu

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
BASELINE_REF = "af63730"  # main before issue 53 item 2
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
print("BENCH " + json.dumps({"wall_s": wall, "timings": record.get("timings"),
                             "library": analysis.__file__}), flush=True)
"""


def baseline_tree(ref: str, into: Path) -> Path:
    """The repository at `ref`, unpacked (no git state shared with this checkout)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


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
        diffs = []
        for key in common:
            x, y = a[key], b[key]
            same = (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9 * max(1, abs(x))
            if not same:
                diffs.append((abs(x - y), key, x, y))
        diffs.sort(reverse=True)
        lines.append(
            f"{name}: {len(common) - len(diffs)} of {len(common)} numbers equal; "
            f"{len(diffs)} differ; only old {len(set(a) - set(b))}, only new {len(set(b) - set(a))}"
        )
        for gap, key, x, y in diffs[:12]:
            lines.append(f"    {key}: {x:.6g} -> {y:.6g} (|d| {gap:.3g})")
    return lines


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
            (scratch / "old-tree").mkdir()
            trees["old"] = baseline_tree(args.baseline_ref, (scratch / "old-tree").resolve())
        results = {}
        for side in sides:
            print(f"{side}: analysing {args.run} at {args.budget} {overrides or ''}", flush=True)
            results[side] = run_side(
                side, trees[side], args.run, args.budget, overrides, scratch, args.threads
            )
            print(f"{side}: {results[side]['wall_s']:.1f} s", flush=True)
        if "new" in results and results["new"]["timings"]:
            print("\nthis checkout, seconds per stage:")
            for stage, seconds in results["new"]["timings"]["stages_s"].items():
                print(f"  {stage:<18} {seconds:8.1f}")
        if "old" in results:
            print(f"\nold ({args.baseline_ref}) analysis wall: {results['old']['wall_s']:.1f} s")
            print("old progress lines (seconds since the analysis began):")
            for line in results["old"]["lines"].splitlines():
                if line.startswith("[analysis"):
                    print(f"  {line}")
        if "old" in results and "new" in results:
            ratio = results["old"]["wall_s"] / results["new"]["wall_s"]
            new_wall = results["new"]["wall_s"]
            print(f"\nnew analysis wall: {new_wall:.1f} s; old / new = {ratio:.2f}x")
            print("\nrecords, old against new:")
            for line in compare_records(results["old"]["copy"], results["new"]["copy"]):
                print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
