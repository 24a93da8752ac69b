"""A rejected run creates no folder: every option is checked before results/ or artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.context import make_context
from tests.harness import recipes


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seed": -1}, r"seed must be in \[0, 4294967295\], got -1"),
        ({"seed": 2**32}, r"seed must be in \[0, 4294967295\], got 4294967296"),
        ({"seed": True}, "seed must be an integer, got True"),
        ({"seed": 1.5}, "seed must be an integer, got 1.5"),
        ({"hardware_profile": "quantum"}, "unknown hardware profile 'quantum'"),
        ({"run_id": "../escape"}, r"run id may hold .* got '\.\./escape'"),
        ({"resume_from": "/definitely/missing"}, "resume path does not exist: /definitely/missing"),
    ],
)
def test_make_context_rejects_before_creating_folders(tmp_path: Path, kwargs, match):
    leaf = tmp_path / "leaf"
    leaf.mkdir()
    with pytest.raises(ValueError, match=match):
        make_context(leaf, **kwargs)
    assert _tree(tmp_path) == ["leaf"]


def test_make_context_rejects_a_file_as_a_parent_folder(tmp_path: Path):
    (tmp_path / "blocker").write_text("a file, not a folder")
    with pytest.raises(ValueError, match=r"artifacts dir .*blocker/inner is not a directory"):
        make_context(tmp_path, artifacts_dir=tmp_path / "blocker" / "inner")
    with pytest.raises(ValueError, match=r"results dir .*blocker is not a directory"):
        make_context(tmp_path, results_dir=tmp_path / "blocker")
    assert _tree(tmp_path) == ["blocker"]


@pytest.mark.parametrize("which", ["--artifacts-dir", "--results-dir"])
def test_cli_run_with_a_file_as_output_folder_leaves_nothing(tmp_path: Path, which, capsys):
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(recipes.QUICK)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    before = _tree(tmp_path)

    assert main([str(leaf), which, str(blocker)]) == 2

    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness: error: "), err
    assert f"{blocker} is not a directory" in err[0]
    assert _tree(tmp_path) == before  # no results/<id>/, no artifacts/<id>/


def test_cli_bad_seed_leaves_nothing(tmp_path: Path, capsys):
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(recipes.QUICK)
    before = _tree(tmp_path)
    assert main([str(leaf), "--seed", "-3"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == "rl-harness: error: seed must be in [0, 4294967295], got -3"
    assert _tree(tmp_path) == before
