"""What makes a run's tree dirty (gitinfo.git_identity), with real git and real runs: other
runs' records (a folder holding a run_manifest.json, committed or not) never count; any other
change does, and the patch holds it and not the records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rl_harness.cli import main
from tests.harness import recipes
from tests.tools.helpers import run_dirs, write_leaf


def experiment_repo(run: Path) -> dict:
    return json.loads((run / "run_manifest.json").read_text())["experiment_repo"]


def test_other_runs_records_do_not_make_a_run_dirty(git_repo, capsys):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.QUICK)
    git("add", "-A")
    git("commit", "-qm", "add leaf")
    assert main([str(leaf), "--seed", "1"]) == 0  # leaves results/<run-id>/ untracked
    (first,) = run_dirs(leaf)
    assert git("status", "--porcelain")  # git itself sees the untracked records
    assert main([str(leaf), "--seed", "2"]) == 0
    second = run_dirs(leaf)[-1]
    record = experiment_repo(second)
    assert record["dirty"] is False and record["patch_file"] is None
    assert record["diff_sha256"] is None and record["untracked"] == []
    assert record["run_records_not_counted"] == sum(p.is_file() for p in first.rglob("*"))
    assert not (second / "experiment_repo.patch").exists()

    # A committed run folder whose record later changes (a crashed run marked) still does not.
    git("add", "-A")
    git("commit", "-qm", "records")
    manifest = first / "run_manifest.json"
    manifest.write_text(manifest.read_text().replace('"completed"', '"crashed"'))
    assert main([str(leaf), "--seed", "3"]) == 0
    assert experiment_repo(run_dirs(leaf)[-1])["dirty"] is False

    # Nor does a committed run folder deleted from the working tree (HEAD holds its
    # manifest): the patch would otherwise carry every deleted record.
    shutil.rmtree(first)
    assert git("status", "--porcelain")  # git sees the deletions
    assert main([str(leaf), "--seed", "5"]) == 0
    record = experiment_repo(run_dirs(leaf)[-1])
    assert record["dirty"] is False and record["diff_sha256"] is None
    git("checkout", "--", ".")

    # Anything else counts, beside records: the patch holds it and no record.
    (repo / "study" / "helper.py").write_text("WEIGHT = 2\n")
    (repo / "README.md").write_text("experiments, edited\n")
    (repo / "study" / "data.csv").write_text("1,2\n")
    assert main([str(leaf), "--seed", "4"]) == 0
    fourth = run_dirs(leaf)[-1]
    record = experiment_repo(fourth)
    assert record["dirty"] is True and record["patch_file"] == "experiment_repo.patch"
    patch = (fourth / "experiment_repo.patch").read_text()
    assert "+WEIGHT = 2" in patch and "+experiments, edited" in patch
    assert "run_manifest" not in patch and '"crashed"' not in patch
    assert sorted(record["untracked"]) == ["study/data.csv", "study/helper.py"]


def test_a_results_folder_without_a_manifest_counts(git_repo, capsys):
    # Only a harness run folder is a record: a hand-made results/ file is a change.
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.QUICK)
    git("add", "-A")
    git("commit", "-qm", "add leaf")
    stray = leaf.parent / "results" / "by-hand" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("not a run\n")
    assert main([str(leaf)]) == 0
    (run,) = [p for p in stray.parents[1].iterdir() if (p / "run_manifest.json").is_file()]
    assert experiment_repo(run)["dirty"] is True
    assert experiment_repo(run)["untracked"] == ["study/leaf/results/by-hand/notes.txt"]
