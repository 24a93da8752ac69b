"""A leaf hands the harness one object, `RECIPE = Recipe(run=..., budgets=..., default=...,
headline=...)` (issue 48 item 3), and the harness reads nothing else of the module.

Through the CLI: a leaf declaring the old module names (BUDGETS, DEFAULT_BUDGET, HEADLINE)
without RECIPE is refused with one line naming the migration; a module with neither is
refused; a bare `run` still runs with a deprecation note. The budgets, default and headline
come from RECIPE even when the module holds other names. `compare` reads the headline from
the source without importing it. The run options are checked and normalised once
(`RunOptions.checked`), and `context.settings` is typed as the recipe's settings type (mypy).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rl_harness import Recipe, train
from rl_harness.cli import main
from rl_harness.harness import context as context_module
from rl_harness.harness.context import RunOptions
from rl_harness.harness.recipe import RecipeError, static_headline

OLD_STYLE = """
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    steps: int


BUDGETS = {"smoke": Budget(1), "cpu": Budget(5)}
DEFAULT_BUDGET = "cpu"
HEADLINE = ("steps",)


def run(context):
    return {"steps": context.settings.steps}
"""

# Module names that disagree with RECIPE: the harness must read RECIPE's only.
DECLARED = """
from dataclasses import dataclass

from rl_harness import Recipe, RunContext


@dataclass(frozen=True)
class Budget:
    steps: int


BUDGETS = {"cpu": Budget(99)}  # not the harness's: RECIPE below says what it reads
DEFAULT_BUDGET = "cpu"
HEADLINE = ("nothing",)


def run(context: RunContext[Budget]) -> dict:
    return {"steps": context.settings.steps, "budget": context.budget, "other": 1}


RECIPE = Recipe(
    run=run,
    budgets={"smoke": Budget(1), "gpu": Budget(7)},
    default="gpu",
    headline=("steps", "other"),
)
"""

BARE = """
def run(context):
    return {"settings": context.settings, "budget": context.budget}
"""


def _leaf(tmp_path: Path, source: str, name: str = "leaf") -> Path:
    path = tmp_path / name / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    return path


def _error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in (captured.err + captured.out).splitlines() if "error:" in line]
    assert len(lines) == 1, captured
    return lines[0]


def test_an_old_style_leaf_is_refused_with_the_migration(tmp_path, capsys):
    leaf = _leaf(tmp_path, OLD_STYLE)
    for flags in ([], ["--smoke"], ["--show-settings"]):
        assert main([str(leaf), *flags, "--no-upload-artifacts"]) == 2
        line = _error_line(capsys)
        assert "declares BUDGETS, DEFAULT_BUDGET, HEADLINE but no RECIPE" in line
        assert "RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET" in line
        assert "docs/migrating.md" in line
    assert not (leaf.parent / "results").exists()


def test_a_module_without_recipe_or_run_is_refused(tmp_path, capsys):
    leaf = _leaf(tmp_path, "VALUE = 1\n")
    assert main([str(leaf), "--no-upload-artifacts"]) == 2
    assert "has no RECIPE (declare RECIPE = Recipe(run=run)" in _error_line(capsys)
    wrong = _leaf(tmp_path, "def run(context):\n    return {}\n\nRECIPE = run\n", "wrong")
    assert main([str(wrong), "--no-upload-artifacts"]) == 2
    assert "RECIPE must be a rl_harness.Recipe, got function" in _error_line(capsys)


def test_a_bare_run_still_runs_with_a_deprecation_note(tmp_path, capsys):
    leaf = _leaf(tmp_path, BARE)
    assert main([str(leaf), "--smoke", "--no-upload-artifacts"]) == 0
    out = capsys.readouterr()
    assert "has no RECIPE: reading its run() alone is deprecated" in out.out
    assert "add RECIPE = Recipe(run=run)" in out.out
    assert "deprecated" not in out.err  # stderr stays a refused run's one error line
    (run,) = (leaf.parent / "results").iterdir()
    assert json.loads((run / "result.json").read_text()) == {"settings": None, "budget": "smoke"}


def test_the_harness_reads_budgets_default_and_headline_from_recipe(tmp_path, capsys):
    leaf = _leaf(tmp_path, DECLARED)
    assert main([str(leaf), "--run-id", "default", "--no-upload-artifacts"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("result: steps 7 | other 1")  # RECIPE's headline, in its order
    runs = leaf.parent / "results"
    result = json.loads((runs / "default" / "result.json").read_text())
    assert result == {"steps": 7, "budget": "gpu", "other": 1}  # RECIPE's default, not "cpu"
    manifest = json.loads((runs / "default" / "run_manifest.json").read_text())
    assert manifest["options"]["budget"] == "gpu" and manifest["options"]["smoke"] is False
    assert manifest["budget"] == {"name": "gpu", "settings": {"steps": 7}, "overrides": {}}
    assert main([str(leaf), "--budget", "cpu", "--no-upload-artifacts"]) == 2
    assert "has no budget 'cpu'; its budgets: smoke, gpu" in _error_line(capsys)
    assert main([str(leaf), "--show-settings"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[1].split() == ["setting", "type", "smoke", "gpu*"]
    assert shown[2].split() == ["steps", "int", "1", "7"]


@dataclasses.dataclass(frozen=True)
class _A:
    n: int


@dataclasses.dataclass(frozen=True)
class _B:
    n: int


def _run(context):
    return {}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"budgets": {"a": _A(1)}}, "Recipe(default=...) must name one of its budgets (a)"),
        ({"budgets": {"a": _A(1)}, "default": "b"}, "got 'b'"),
        ({"budgets": {"a": _A(1), "b": _B(2)}, "default": "a"}, "instances of one dataclass"),
        ({"budgets": {"a": 3}, "default": "a"}, "instances of one dataclass"),
        ({"budgets": [_A(1)]}, "must be a dict of name -> settings"),
        ({"default": "a"}, "names a budget, but none are declared"),
        ({"headline": "score"}, "must be a tuple of result keys"),
        ({"headline": ("score", 3)}, "must be a tuple of result keys"),
    ],
)
def test_a_bad_recipe_is_refused_when_built(arguments, message):
    with pytest.raises(RecipeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Recipe(run=_run, **arguments)
    with pytest.raises(RecipeError, match="must be the run"):
        Recipe(run=3)  # type: ignore[arg-type]


def test_compare_reads_the_headline_from_source_without_importing(tmp_path):
    package = tmp_path / "repo" / "study"
    (package / "base").mkdir(parents=True)
    (package / "other").mkdir()
    for folder in (package, package / "base", package / "other"):
        (folder / "__init__.py").write_text("")
    never = "raise RuntimeError('imported')\n"
    base = package / "base" / "experiment.py"
    base.write_text(
        never + 'HEADLINE = ("a", "b/c")\nRECIPE = Recipe(run=run, headline=HEADLINE)\n'
    )
    literal = package / "other" / "literal.py"
    literal.write_text(never + 'RECIPE = Recipe(run, {}, None, ("x",))\n')
    imported = package / "other" / "experiment.py"
    imported.write_text(
        never + "from study.base.experiment import HEADLINE as H\n"
        "RECIPE = Recipe(run=run, headline=H)\n"
    )
    relative = package / "other" / "relative.py"
    relative.write_text(
        never + "from ..base.experiment import HEADLINE\nRECIPE = Recipe(run, headline=HEADLINE)\n"
    )
    old = package / "other" / "old.py"
    old.write_text(never + 'HEADLINE = ("old",)\n')
    none = package / "other" / "none.py"
    none.write_text(never + "RECIPE = Recipe(run=run)\n")
    assert static_headline(base) == ("a", "b/c")
    assert static_headline(literal) == ("x",)
    assert static_headline(imported) == ("a", "b/c")
    assert static_headline(relative) == ("a", "b/c")
    assert static_headline(old) == ("old",)  # a leaf from before RECIPE: its runs still compare
    assert static_headline(none) == ()
    assert static_headline(package / "missing.py") == ()


def test_options_are_checked_and_normalised_once():
    checked = RunOptions(smoke=True).checked()
    assert (checked.smoke, checked.budget) == (True, "smoke")
    assert RunOptions(budget="smoke").checked() == checked  # the same run, either way asked
    assert checked.checked() is checked  # a checked value is not checked again
    assert dataclasses.replace(checked, seed=3).checked() is not None  # a new value: checked
    refusals = [
        (RunOptions(smoke=True, budget="cpu"), "--smoke means --budget smoke"),
        (RunOptions(seed=-1), "seed must be in"),
        (RunOptions(seed=True), "seed must be an integer"),
        (RunOptions(overrides="iterations=3"), "overrides takes a sequence of 'KEY=VALUE'"),
        (RunOptions(overrides=("iterations",)), "--set takes KEY=VALUE"),
    ]
    for options, message in refusals:
        with pytest.raises(ValueError, match=message):
            options.checked()


def test_a_run_checks_its_options_once(tmp_path, monkeypatch):
    leaf = _leaf(tmp_path, DECLARED)
    calls = []
    real = context_module.validate_seed
    monkeypatch.setattr(
        context_module, "validate_seed", lambda seed: calls.append(seed) or real(seed)
    )
    done = train(str(leaf), smoke=True, seed=5, upload_artifacts="never")
    assert done.status == "completed" and done.result == {"steps": 1, "budget": "smoke", "other": 1}
    assert calls == [5]  # from the CLI options to the recipe's context: one check
