"""The CLI's bad-input handling and its lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.cli import main
from tests.harness import recipes


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one clear line, no traceback
    assert err[0].startswith("rl-harness: error: ")
    return err[0]


@pytest.fixture
def leaf(tmp_path: Path) -> Path:
    path = tmp_path / "leaf" / "experiment.py"
    path.parent.mkdir()
    path.write_text(recipes.QUICK)
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["experiments.does_not_exist.experiment"], "cannot find experiment module"),
        (["no_such_top_package.leaf.experiment"], "cannot find experiment module"),
        (["experiments.example_study"], "is a package, not an experiment module"),
        (["plainword"], "neither a dotted module path"),
        (["/no/such/file/experiment.py"], "no such experiment file"),
    ],
)
def test_bad_targets_get_one_line(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in _error_line(capsys)


def test_module_without_run(tmp_path: Path, capsys):
    path = tmp_path / "norun" / "experiment.py"
    path.parent.mkdir()
    path.write_text(recipes.NO_RUN)
    assert main([str(path)]) == 2
    assert "has no RECIPE" in _error_line(capsys)
    assert not (path.parent / "results").exists()  # nothing allocated for bad input


def test_directory_target(tmp_path: Path, capsys):
    (tmp_path / "a.dir").mkdir()
    assert main([str(tmp_path / "a.dir")]) == 2
    assert "is a directory" in _error_line(capsys)


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--seed", "abc"], "seed must be an integer"),
        (["--seed", "-3"], "seed must be in"),
        (["--seed", str(2**32)], "seed must be in"),
        (["--resume-from", "/definitely/missing"], "resume path does not exist"),
        (["--hardware-profile", "quantum"], "unknown hardware profile"),
        (["--run-id", "../escape"], "run id may hold"),
        (["--bogus-flag"], "unrecognized arguments"),
    ],
)
def test_bad_options_get_one_line(option, expected, leaf: Path, capsys):
    assert main([str(leaf), *option]) == 2
    assert expected in _error_line(capsys)
    assert not (leaf.parent / "results").exists()


def test_import_error_inside_recipe_is_one_line(tmp_path: Path, capsys):
    path = tmp_path / "broken" / "experiment.py"
    path.parent.mkdir()
    path.write_text("import package_that_is_not_installed_xyz\n\ndef run(context):\n    pass\n")
    assert main([str(path)]) == 2
    assert "package_that_is_not_installed_xyz" in _error_line(capsys)


def test_duplicate_run_id_is_refused(leaf: Path, capsys):
    assert main([str(leaf), "--run-id", "fixed-id"]) == 0
    capsys.readouterr()
    assert main([str(leaf), "--run-id", "fixed-id"]) == 2
    assert "already exists" in _error_line(capsys)


def test_help_is_lazy_and_lists_tools():
    # --help must not pay for Ray or torch imports (it answers in well under a second).
    code = (
        "import sys\n"
        "from rl_harness.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('ray', 'torch', 'gymnasium', 'numpy') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout
    for word in ("new", "runs", "show", "diff", "reproduce", "upload", "download", "vast"):
        assert f"rl-harness {word}" in out.stdout
    assert "--hardware-profile" in out.stdout and "--ray-address" in out.stdout
