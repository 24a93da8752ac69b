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


# The smoke budget's `greedy` is True: a false word must turn it off, a true word keep it on.
@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("false", False),
        ("off", False),
        ("0", False),
        ("no", False),
        ("true", True),
        ("on", True),
        ("YES", True),
    ],
)
def test_set_bool_reads_each_word(word, expected, tmp_path, capsys):
    leaf = _leaf(tmp_path)
    assert main([str(leaf), "--smoke", "--set", f"greedy={word}"]) == 0, capsys.readouterr().err
    result = _result(leaf)
    assert result["greedy"] is expected
    (run,) = (leaf.parent / "results").iterdir()
    recorded = json.loads((run / "run_manifest.json").read_text())["budget"]
    assert recorded["overrides"] == {"greedy": expected}


@pytest.mark.parametrize("word", ["inf", "-inf", "-Infinity", "1e999"])
def test_set_float_refuses_a_non_finite_number(word, tmp_path, capsys):
    leaf = _leaf(tmp_path)
    assert main([str(leaf), "--set", f"lr={word}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0] == (f"rl-harness: error: --set lr={word}: expected a finite number (lr is float)")
    assert not (leaf.parent / "results").exists()
