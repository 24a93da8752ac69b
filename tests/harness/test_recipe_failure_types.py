"""A recipe failing with any exception type is a failed run, not only with RuntimeError.

Through the CLI: status `failed` with the error's type and message in the manifest, the
traceback in `error.txt` and on stderr, exit code 1 (README: the provenance manifest;
`lifecycle.EXIT_FAILED`). A ValueError from the recipe must not pass for a refused option
(exit 2, one `rl-harness: error:` line), nor a KeyError escape as a crash.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.cli import main

CLI = Path(sys.executable).parent / "rl-harness"

RECIPES = {
    "ValueError": (
        "def run(context):\n    raise ValueError('learning rate must be positive, got -3')\n",
        "learning rate must be positive, got -3",
    ),
    "KeyError": (
        "def run(context):\n    config = {'lr': 0.1}\n    return config['missing_key']\n",
        "'missing_key'",
    ),
    "StudyDiverged": (
        "class StudyDiverged(Exception):\n    pass\n\n\n"
        "def run(context):\n    raise StudyDiverged('loss went to nan at iteration 7')\n",
        "loss went to nan at iteration 7",
    ),
}


def _leaf(tmp_path: Path, source: str) -> Path:
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(source)
    return leaf


def _only_run(leaf: Path) -> Path:
    (run_dir,) = (leaf.parent / "results").iterdir()
    return run_dir


def _assert_failed_run(run_dir: Path, kind: str, message: str) -> None:
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["ended_at"] is not None
    assert manifest["error"] == {
        "type": kind,
        "message": message,
        "traceback_file": "error.txt",
    }
    traceback_text = (run_dir / "error.txt").read_text()
    assert traceback_text.startswith("Traceback (most recent call last):")
    assert f"{kind}: {message}" in traceback_text


@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_any_exception_from_the_recipe_is_a_failed_run(kind, tmp_path: Path, capsys):
    source, message = RECIPES[kind]
    leaf = _leaf(tmp_path, source)
    code = main([str(leaf), "--no-upload-artifacts"])
    err = capsys.readouterr().err
    assert code == 1, err
    _assert_failed_run(_only_run(leaf), kind, message)
    assert f"{kind}: {message}" in err  # the traceback is shown too
    assert "rl-harness: error:" not in err  # not mistaken for a refused option


def test_the_console_script_exits_1_for_a_custom_exception(tmp_path: Path):
    source, message = RECIPES["StudyDiverged"]
    leaf = _leaf(tmp_path, source)
    done = subprocess.run(
        [str(CLI), str(leaf), "--no-upload-artifacts"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    _assert_failed_run(_only_run(leaf), "StudyDiverged", message)
    assert "StudyDiverged: loss went to nan at iteration 7" in done.stderr
