"""What trained is what was recorded (issue 51 item 1): every bundled leaf and every
`rl-harness new` template reads its budget through `context.settings`, so `--set` and
`--budget` reach the training loop, and metrics.jsonl, config.json and `show` agree.

The fast tests read each recipe's `run` (its AST) for the old pattern that ignored `--set`
(`BUDGETS["smoke" if context.smoke else DEFAULT_BUDGET]`), and check each declares the one
`RECIPE = Recipe(run=run, ...)` the harness reads (issue 48 item 3), its `run` typed
`RunContext[<settings>]`, with no re-export line left for the harness; the slow ones run
each training leaf and template through the CLI with `--smoke --set iterations=2 --set
train_batch=...` and compare the iterations in metrics.jsonl and the batch size in
config.json with the record.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.harness.recipe import _recipe_arguments
from rl_harness.harness.scaffold import LEAF_PATH, TEMPLATE_DIR, TEMPLATES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rl-experiments"
LEAVES = sorted(EXAMPLES.glob("experiments/**/experiment.py"))
# The cartpole template is the bundled example_study leaf itself; the others are files here.
TEMPLATE_FILES = sorted(TEMPLATE_DIR / t[2] for t in TEMPLATES.values() if t is not None)
# Leaves that train (a synthesis pools other runs; its budget names the runs it reads).
TRAINING = [leaf for leaf in LEAVES if leaf.parent.name != "synthesis"]


def _run_function(source: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    (run,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
    return run


def _reads_budgets_by_hand(run: ast.FunctionDef) -> list[str]:
    """Every `BUDGETS[...]` (or `<module>.BUDGETS[...]`) subscript inside `run`."""
    found = []
    for node in ast.walk(run):
        if isinstance(node, ast.Subscript):
            target = node.value
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
            if name == "BUDGETS":
                found.append(ast.unparse(node))
    return found


def _reads_settings(run: ast.FunctionDef) -> bool:
    """`context.settings` read in `run`, or `run` handing its context to another leaf's
    `run` (`ppo.run(context, ...)`: that leaf is checked on its own)."""
    for node in ast.walk(run):
        if isinstance(node, ast.Attribute) and node.attr == "settings":
            if ast.unparse(node.value) == "context":
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            passed = [ast.unparse(a) for a in node.args]
            if node.func.attr == "run" and passed[:1] == ["context"]:
                return True
    return False


def test_the_bundled_leaves_and_templates_are_all_checked():
    names = {p.relative_to(EXAMPLES).as_posix() for p in LEAVES}
    assert "experiments/mess3_belief_geometry/reward_only/experiment.py" in names
    assert len(TRAINING) >= 10 and len(TEMPLATE_FILES) >= 1


@pytest.mark.parametrize(
    "path", [*LEAVES, *TEMPLATE_FILES], ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}"
)
def test_each_recipe_reads_its_budget_through_context_settings(path: Path):
    run = _run_function(path.read_text())
    assert _reads_budgets_by_hand(run) == [], f"{path}: run() picks its budget by hand"
    assert _reads_settings(run), f"{path}: run() never reads context.settings"


@pytest.mark.parametrize(
    "path", [*LEAVES, *TEMPLATE_FILES], ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}"
)
def test_each_recipe_declares_the_one_recipe_the_harness_reads(path: Path):
    source = path.read_text()
    tree = ast.parse(source)
    _, arguments = _recipe_arguments(tree.body)  # exactly one RECIPE = Recipe(...)
    assert ast.unparse(arguments["run"]) == "run", path
    assert {"budgets", "default"} <= set(arguments), f"{path}: RECIPE names no budgets"
    (context,) = _run_function(source).args.args[:1]
    assert context.annotation is not None
    assert ast.unparse(context.annotation).startswith("RunContext["), f"{path}: run untyped"
    reexports = [
        line
        for line in source.splitlines()
        if "noqa: F401" in line
        and any(n in line for n in ("BUDGETS", "DEFAULT_BUDGET", "HEADLINE"))
    ]
    assert reexports == [], f"{path}: re-exports for the harness"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
    )


def check_trained_as_recorded(leaf: Path, cwd: Path, tmp_path: Path) -> None:
    """Run `leaf` with --smoke and two --set overrides; what trained must be the record."""
    run_id = "as-recorded"
    ran = _cli(
        str(leaf),
        "--smoke",
        "--set",
        "iterations=2",
        "--set",
        "train_batch=512",
        "--run-id",
        run_id,
        "--results-dir",
        str(tmp_path / "results"),
        "--artifacts-dir",
        str(tmp_path / "artifacts"),
        "--no-upload-artifacts",
        cwd=cwd,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    run_dir = tmp_path / "results" / run_id
    config = json.loads((run_dir / "config.json").read_text())
    assert config["budget"]["name"] == "smoke"
    assert config["budget"]["overrides"] == {"iterations": 2, "train_batch": 512}
    assert config["budget"]["settings"]["iterations"] == 2
    # What trained: two iterations in metrics.jsonl, 512 env steps per learner batch.
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["training_iteration"] for row in rows] == [1, 2]
    assert config["train_batch_size_per_learner"] == 512
    shown = _cli("show", str(run_dir), cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert "iterations=2 (--set)" in shown.stdout and "train_batch=512 (--set)" in shown.stdout


@pytest.mark.slow
@pytest.mark.parametrize("leaf", TRAINING, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_each_training_leaf_trains_what_it_records(leaf: Path, tmp_path: Path):
    check_trained_as_recorded(leaf, EXAMPLES, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_each_template_leaf_trains_what_it_records(template: str, tmp_path: Path):
    from rl_harness.cli import main

    repo = tmp_path / "repo"
    assert main(["new", str(repo), "--template", template]) == 0
    chosen = TEMPLATES[template]
    leaf = repo / (chosen[1] if chosen is not None else LEAF_PATH)
    check_trained_as_recorded(leaf, repo, tmp_path)
