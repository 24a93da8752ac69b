"""Budgets chosen by name: `rl-harness TARGET --budget NAME --set KEY=VALUE --show-settings`.

Through the CLI a user types: the recipe's BUDGETS pick the settings the recipe gets
(`context.budget`, `context.settings`), `--set` changes one field, type-checked, and every
bad name or value is one line, exit code 2, before any folder or Ray session exists. The
choice is recorded in the manifest (options and `budget`) and in config.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.budgets import BudgetError, resolve_budget
from rl_harness.harness.context import make_context

BUDGETED = """
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    iterations: int
    lr: float
    greedy: bool
    label: str
    sizes: tuple[int, ...]
    cap: int | None = None


SMOKE = Budget(1, 0.1, True, "s", (1, 2))
CPU = Budget(5, 0.01, False, "c", (3, 4))
FULL = Budget(50, 0.001, False, "f", (5, 6), 9)
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"


def run(context):
    s = context.settings
    return {
        "budget": context.budget,
        "smoke": context.smoke,
        "iterations": s.iterations,
        "lr": s.lr,
        "greedy": s.greedy,
        "label": s.label,
        "sizes": list(s.sizes),
        "cap": s.cap,
    }
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""

# What other engineers' new leaves write until they read context.settings: still works.
INTERIM_FORM = BUDGETED.replace(
    "    s = context.settings", '    s = BUDGETS["smoke" if context.smoke else DEFAULT_BUDGET]'
)

UNBUDGETED = """
def run(context):
    return {"budget": context.budget, "settings": context.settings, "smoke": context.smoke}


from rl_harness import Recipe
RECIPE = Recipe(run=run)
"""

# A real (tiny) PPO run whose budget sets the batch: config.json shows what was trained.
PPO_BUDGETED = """
from dataclasses import dataclass

import ray  # a real recipe imports Ray: refused input must still start no session
from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import run_algorithm


@dataclass(frozen=True)
class Budget:
    iterations: int
    train_batch: int


BUDGETS = {"smoke": Budget(1, 64), "cpu": Budget(3, 128), "full": Budget(9, 256)}
DEFAULT_BUDGET = "cpu"


def run(context):
    plan = context.settings
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=plan.train_batch, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    result = run_algorithm(config, context, stop=plan.iterations)
    return {"iterations": result.iterations}
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


def _leaf(tmp_path: Path, source: str, name: str = "leaf") -> Path:
    path = tmp_path / name / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    return path


def _run_dir(leaf: Path) -> Path:
    (run,) = sorted((leaf.parent / "results").iterdir())
    return run


def _json(path: Path):
    return json.loads(path.read_text())


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith("rl-harness: error: ")
    return err[0]


@pytest.mark.parametrize(
    ("argv", "budget", "expected"),
    [
        ([], "cpu", {"iterations": 5, "smoke": False}),
        (["--smoke"], "smoke", {"iterations": 1, "smoke": True}),
        (["--budget", "smoke"], "smoke", {"iterations": 1, "smoke": True}),
        (["--smoke", "--budget", "smoke"], "smoke", {"iterations": 1}),
        (["--budget", "full"], "full", {"iterations": 50, "cap": 9}),
        (
            ["--budget", "full", "--set", "iterations=7", "--set", "lr=2.5e-4"],
            "full",
            {"iterations": 7, "lr": 2.5e-4, "cap": 9},
        ),
        (
            ["--set", "greedy=true", "--set", "label=x=y", "--set", "sizes=7, 8,9"],
            "cpu",
            {"greedy": True, "label": "x=y", "sizes": [7, 8, 9]},
        ),
        (["--budget", "full", "--set", "cap=none"], "full", {"cap": None}),
    ],
)
def test_budget_and_overrides_reach_the_recipe_and_the_manifest(
    argv, budget, expected, tmp_path, capsys
):
    leaf = _leaf(tmp_path, BUDGETED)
    assert main([str(leaf), *argv]) == 0, capsys.readouterr().err
    run = _run_dir(leaf)
    result = _json(run / "result.json")
    assert result["budget"] == budget
    assert {key: result[key] for key in expected} == expected
    manifest = _json(run / "run_manifest.json")
    assert manifest["options"]["budget"] == budget
    assert manifest["options"]["smoke"] is (budget == "smoke")
    sets = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    assert manifest["options"]["set"] == sets
    recorded = manifest["budget"]
    assert recorded["name"] == budget
    assert {k: recorded["settings"][k] for k in expected if k != "smoke"} == {
        k: v for k, v in expected.items() if k != "smoke"
    }
    assert set(recorded["overrides"]) == {text.split("=", 1)[0] for text in sets}


def test_the_interim_form_of_new_leaves_still_runs(tmp_path, capsys):
    leaf = _leaf(tmp_path, INTERIM_FORM)
    assert main([str(leaf), "--smoke"]) == 0, capsys.readouterr().err
    assert _json(_run_dir(leaf) / "result.json")["iterations"] == 1


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--set", "itrations=3"], "unknown setting 'itrations' for budget 'cpu'"),
        (["--set", "iterations=1.5"], "--set iterations=1.5: expected an integer (iterations"),
        (["--set", "lr=fast"], "--set lr=fast: expected a number (lr is float)"),
        (["--set", "lr=nan"], "expected a finite number"),
        (["--set", "greedy=maybe"], "expected true or false (greedy is bool)"),
        (["--set", "sizes=1,x"], "expected an integer (sizes is tuple[int, ...]; write sizes=3,3)"),
        (["--set", "iterations"], "--set takes KEY=VALUE"),
        (["--set", "iterations=2", "--set", "iterations=3"], "--set iterations is given twice"),
        (["--budget", "gpu"], "has no budget 'gpu'; its budgets: smoke, cpu, full"),
        (["--smoke", "--budget", "full"], "--smoke means --budget smoke"),
    ],
)
def test_bad_budget_input_is_one_line_and_leaves_nothing(argv, expected, tmp_path, capsys):
    leaf = _leaf(tmp_path, BUDGETED)
    assert main([str(leaf), *argv]) == 2
    line = _error_line(capsys)
    assert expected in line
    if "unknown setting" in expected:  # the line names the accepted keys
        assert line.endswith("settings: iterations, lr, greedy, label, sizes, cap")
    assert not (leaf.parent / "results").exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--budget", "cpu"], "declares no budgets, so it has no budget 'cpu'"),
        (["--set", "iterations=3"], "declares no budgets: --set has nothing to set"),
    ],
)
def test_recipe_without_budgets_takes_only_smoke(argv, expected, tmp_path, capsys):
    leaf = _leaf(tmp_path, UNBUDGETED)
    assert main([str(leaf), *argv]) == 2
    assert expected in _error_line(capsys)
    for flags, budget in (([], None), (["--smoke"], "smoke"), (["--budget", "smoke"], "smoke")):
        assert main([str(leaf), *flags]) == 0
        run = sorted((leaf.parent / "results").iterdir(), key=lambda p: p.stat().st_mtime)[-1]
        result = _json(run / "result.json")
        assert result == {"budget": budget, "settings": None, "smoke": budget == "smoke"}
        assert _json(run / "run_manifest.json")["budget"]["settings"] is None


def test_show_settings_lists_budgets_and_starts_nothing(tmp_path, capsys):
    leaf = _leaf(tmp_path, BUDGETED)
    assert main([str(leaf), "--show-settings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "budgets smoke, cpu, full" in lines[0]
    header = lines[1].split()
    assert header == ["setting", "type", "smoke", "cpu*", "full"]  # * the default
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["iterations"] == ["int", "1", "5", "50"]
    assert rows["lr"] == ["float", "0.1", "0.01", "0.001"]
    assert rows["cap"][-3:] == ["None", "None", "9"]
    # With --budget/--set: checked as a run would, and the chosen column shown.
    assert main([str(leaf), "--show-settings", "--budget", "full", "--set", "iterations=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-3:] == ["full", "+", "--set"]
    assert {line.split()[0]: line.split()[-1] for line in lines[2:]}["iterations"] == "2"
    assert main([str(leaf), "--show-settings", "--set", "nope=1"]) == 2
    assert "unknown setting 'nope'" in _error_line(capsys)
    assert not (leaf.parent / "results").exists()
    # A recipe without budgets says so.
    plain = _leaf(tmp_path, UNBUDGETED, name="plain")
    assert main([str(plain), "--show-settings"]) == 0
    assert "declares no budgets" in capsys.readouterr().out


def test_make_context_resolves_an_imported_recipes_budgets(tmp_path):
    # A notebook that imported the recipe gets the same settings as the CLI would give.
    leaf = _leaf(tmp_path, BUDGETED)
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        module = importlib.import_module("leaf.experiment")
        context = make_context(
            tmp_path, experiment_module=module.__name__, budget="full", overrides=("cap=3",)
        )
        assert context.budget == "full" and context.settings == module.FULL.__class__(
            50, 0.001, False, "f", (5, 6), 3
        )
        assert context.overrides == {"cap": 3}
        assert make_context(tmp_path, experiment_module=module.__name__).settings == module.CPU
        with pytest.raises(BudgetError, match="has no budget 'gpu'"):
            make_context(tmp_path, experiment_module=module.__name__, budget="gpu")
        smoke = resolve_budget(module.RECIPE, "smoke", owner=module.__name__)
        assert smoke.settings == module.SMOKE
        assert make_context(tmp_path, experiment_module=module.__name__, smoke=True).settings == (
            module.SMOKE
        )
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("leaf.experiment", "leaf"):
            sys.modules.pop(name, None)
    assert leaf.exists()


def _cli(argv: list[str], cwd: Path, ray_tmp: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_ADDRESS": ""}
    return subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_refused_budget_input_starts_no_ray(tmp_path):
    """In its own process, as a user runs it: a recipe that imports Ray, refused input. No
    Ray session folder appears under RAY_TMPDIR (where a run's session lives: Ray puts
    `ray/session_*` there) and no run folder is made: the check runs before Ray starts."""
    leaf = _leaf(tmp_path, PPO_BUDGETED)
    ray_tmp = tempfile.mkdtemp(prefix="rb", dir="/tmp")  # short: Ray's socket paths
    try:
        for bad, expected in (
            (["--set", "iterations=two"], "expected an integer"),
            (["--set", "batch=1"], "unknown setting 'batch'"),
            (["--budget", "huge"], "has no budget 'huge'"),
        ):
            refused = _cli([str(leaf), *bad], tmp_path, ray_tmp)
            assert refused.returncode == 2, refused.stderr
            (line,) = refused.stderr.strip().splitlines()
            assert line.startswith("rl-harness: error: ") and expected in line
            assert list(Path(ray_tmp).iterdir()) == []
            assert not (leaf.parent / "results").exists()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_real_run_records_budget_in_manifest_and_config(ray_session, tmp_path, capsys):
    """A real PPO run through the CLI's main: the chosen budget (with an override) is what
    trained, and the manifest and config.json record it; `runs` shows it."""
    leaf = _leaf(tmp_path, PPO_BUDGETED)
    argv = [str(leaf), "--budget", "full", "--set", "iterations=1"]
    assert main(argv) == 0, capsys.readouterr().err
    run = _run_dir(leaf)
    manifest = _json(run / "run_manifest.json")
    assert manifest["options"]["budget"] == "full"
    assert manifest["options"]["set"] == ["iterations=1"]
    assert manifest["budget"] == {
        "name": "full",
        "settings": {"iterations": 1, "train_batch": 256},
        "overrides": {"iterations": 1},
    }
    config = _json(run / "config.json")
    assert config["budget"] == manifest["budget"]
    assert config["train_batch_size_per_learner"] == 256  # FULL's batch was trained
    assert _json(run / "result.json") == {"iterations": 1}
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    capsys.readouterr()
    assert main(["runs", str(leaf.parent)]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert row.split()[header.split().index("budget")] == "full"
    assert main(["show", str(run)]) == 0
    text = capsys.readouterr().out
    assert "budget full" in text and "settings    iterations=1 (--set), train_batch=256" in text
