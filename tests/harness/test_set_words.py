"""`rl-harness TARGET --set KEY=VALUE` reads booleans and floats by their words (issue 49,
classes 1-2): every false word reaches the recipe as False, and an infinite float is refused
as one line, exit code 2, before any run folder exists. Through the CLI, on a budgeted leaf."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_harness.cli import main
from tests.harness.test_budgets import BUDGETED


def _leaf(tmp_path: Path) -> Path:
    path = tmp_path / "leaf" / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(BUDGETED)
    return path


def _result(leaf: Path) -> dict:
    (run,) = (leaf.parent / "results").iterdir()
    return json.loads((run / "result.json").read_text())


# One bool setting per word, each budget value the opposite of what its word says: one run
# reads them all.
WORDS = {"false": False, "off": False, "0": False, "no": False, "FALSE": False}
WORDS |= {"true": True, "on": True, "1": True, "yes": True, "Yes": True}
FLAGS = """
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
{fields}


BUDGETS = {{"smoke": Budget()}}
DEFAULT_BUDGET = "smoke"


def run(context):
    return {{name: getattr(context.settings, name) for name in {names!r}}}
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


def test_set_bool_reads_each_word(tmp_path, capsys):
    names = {word: f"flag_{i}" for i, word in enumerate(WORDS)}
    fields = "\n".join(f"    {names[w]}: bool = {not value}" for w, value in WORDS.items())
    path = tmp_path / "flags" / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(FLAGS.format(fields=fields, names=list(names.values())))
    sets = [part for word in WORDS for part in ("--set", f"{names[word]}={word}")]
    assert main([str(path), *sets]) == 0, capsys.readouterr().err
    expected = {names[word]: value for word, value in WORDS.items()}
    assert _result(path) == expected
    (run,) = (path.parent / "results").iterdir()
    recorded = json.loads((run / "run_manifest.json").read_text())["budget"]
    assert recorded["overrides"] == expected and recorded["settings"] == expected
    # And through a real recipe's budget: the smoke budget's greedy (True) turned off.
    leaf = _leaf(tmp_path)
    assert main([str(leaf), "--smoke", "--set", "greedy=off"]) == 0
    assert _result(leaf)["greedy"] is False


@pytest.mark.parametrize("word", ["inf", "-inf", "-Infinity", "1e999"])
def test_set_float_refuses_a_non_finite_number(word, tmp_path, capsys):
    leaf = _leaf(tmp_path)
    assert main([str(leaf), "--set", f"lr={word}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0] == (f"rl-harness: error: --set lr={word}: expected a finite number (lr is float)")
    assert not (leaf.parent / "results").exists()
