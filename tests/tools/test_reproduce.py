"""`rl-harness reproduce` on quick recipes: verdicts, the refuse/warn rule, moved checkouts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.metrics import read_metrics, without_timings
from rl_harness.harness.runtools.compare import compare_metrics
from tests.tools import recipes
from tests.tools.helpers import error_line, manifest, run_dirs, run_leaf, write_leaf


@pytest.fixture
def committed_leaf(git_repo):
    def make(source: str, name: str = "leaf") -> Path:
        repo, git = git_repo
        leaf = write_leaf(repo, source, name)
        git("add", "-A")
        git("commit", "-qm", f"add {name}")
        return leaf

    return make


def _reproduce(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["reproduce", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _new_run(leaf: Path, original: Path) -> Path:
    (new,) = [p for p in run_dirs(leaf) if p != original]
    return new


def test_deterministic_recipe_reproduces_identically(committed_leaf, capfd):
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf, "--seed", "7", "--smoke", "--hardware-profile", "auto")
    code, out, err = _reproduce(capfd, str(original))
    assert code == 0, (out, err)
    assert "metrics: identical (3 recorded rows, 3 new" in out
    new = _new_run(leaf, original)
    assert new.name != original.name and f"new run: {new}" in out
    a, b = manifest(original), manifest(new)
    assert b["status"] == "completed" and b["seed"] == 7
    for key in ("seed", "smoke", "hardware_profile"):
        assert b["options"][key] == a["options"][key]
    assert b["experiment"]["source_sha256"] == a["experiment"]["source_sha256"]
    # Timing keys differ run to run; everything else matches.
    rows_a, rows_b = read_metrics(original / "metrics.jsonl"), read_metrics(new / "metrics.jsonl")
    assert rows_a != rows_b
    assert [without_timings(r) for r in rows_a] == [without_timings(r) for r in rows_b]
    assert "refused" not in err and "experiment repo commit differs" not in err


def test_random_recipe_is_different(committed_leaf, capfd):
    original = run_leaf(committed_leaf(recipes.URANDOM))
    code, out, _ = _reproduce(capfd, str(original))
    assert code == 1
    assert "metrics: different (2 recorded rows, 2 new" in out
    assert "row 1: env_runners/episode_return_mean recorded" in out


def test_tolerance(committed_leaf, capfd):
    original = run_leaf(committed_leaf(recipes.JITTER))
    code, out, _ = _reproduce(capfd, str(original))
    assert code == 0 and "metrics: within tolerance" in out
    code, out, _ = _reproduce(capfd, str(original), "--rtol", "0")
    assert code == 1 and "metrics: different" in out
    code, out, _ = _reproduce(capfd, str(original), "--rtol", "0", "--atol", "1e-6")
    assert code == 0 and "metrics: within tolerance" in out
    assert main(["reproduce", str(original), "--rtol", "-1"]) == 2
    assert "expected a number >= 0" in error_line(capfd)


def test_edited_source_is_refused_unless_forced(committed_leaf, capfd):
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf)
    leaf.write_text(leaf.read_text() + "\n# an edit that changes no number\n")
    code, _, err = _reproduce(capfd, str(original))
    assert code == 2
    assert "refused: experiment source experiment.py differs" in err
    assert err.strip().splitlines()[-1] == (
        "rl-harness: error: the code differs from the record; commit or revert it, or pass --force"
    )
    assert run_dirs(leaf) == [original]  # nothing ran
    code, out, err = _reproduce(capfd, str(original), "--force")
    assert code == 0 and "metrics: identical" in out
    assert "warning: experiment source experiment.py differs" in err


def test_other_uncommitted_code_is_refused(committed_leaf, git_repo, capfd):
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf)
    repo, _ = git_repo
    (repo / "study" / "helper.py").write_text("SCALE = 2\n")  # untracked code is in the patch
    code, _, err = _reproduce(capfd, str(original))
    assert code == 2
    assert "refused: uncommitted changes in the experiment repo (patch sha256) differs" in err


def test_same_dirty_patch_is_accepted(git_repo, capfd):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.SEEDED)  # never committed: the run records it as a patch
    original = run_leaf(leaf)
    assert manifest(original)["experiment_repo"]["diff_sha256"]
    code, out, err = _reproduce(capfd, str(original))
    assert code == 0 and "metrics: identical" in out and "refused" not in err


def test_new_commit_only_warns(committed_leaf, git_repo, capfd):
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf)
    repo, git = git_repo
    (repo / "NOTES.md").write_text("later\n")
    git("add", "NOTES.md")
    git("commit", "-qm", "notes")
    code, out, err = _reproduce(capfd, str(original))
    assert code == 0 and "metrics: identical" in out
    assert "warning: experiment repo commit differs" in err


def test_results_dir_option(committed_leaf, tmp_path: Path, capfd):
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf)
    elsewhere = tmp_path / "reproductions"
    code, out, _ = _reproduce(capfd, str(original), "--results-dir", str(elsewhere))
    (new,) = elsewhere.iterdir()
    assert code == 0 and f"new run: {new}" in out and run_dirs(leaf) == [original]
    assert manifest(new)["options"]["results_dir"] == str(elsewhere)


def test_reproduce_from_another_clone(committed_leaf, git_repo, tmp_path: Path, capfd):
    """Results are tracked: a fresh clone elsewhere reproduces the run from its own files."""
    leaf = committed_leaf(recipes.SEEDED)
    original = run_leaf(leaf, "--seed", "3")
    repo, git = git_repo
    git("add", "-A")
    git("commit", "-qm", "results")
    clone = tmp_path / "elsewhere"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    cloned_run = clone / original.relative_to(repo)
    leaf.unlink()  # the recorded source path no longer exists
    code, out, err = _reproduce(capfd, str(cloned_run))
    assert code == 0 and "metrics: identical" in out, (out, err)
    new = _new_run(clone / "study" / "leaf" / "experiment.py", cloned_run)
    assert manifest(new)["experiment"]["source_file"] == str(clone / "study/leaf/experiment.py")
    assert manifest(new)["seed"] == 3


def test_bad_reproduce_input(committed_leaf, tmp_path: Path, capfd):
    no_metrics = run_leaf(committed_leaf(recipes.NO_METRICS))
    assert main(["reproduce", str(no_metrics)]) == 2
    assert "has no metrics.jsonl to compare against" in error_line(capfd)
    assert main(["reproduce", str(tmp_path / "missing" / "run")]) == 2
    assert "no such run folder" in error_line(capfd)


def test_missing_resume_point_is_refused(committed_leaf, capfd):
    original = run_leaf(committed_leaf(recipes.SEEDED))
    path = original / "run_manifest.json"
    path.write_text(path.read_text().replace('"resume_from": null', '"resume_from": "/no/ckpt"'))
    assert main(["reproduce", str(original)]) == 2
    assert "resumed from /no/ckpt, which does not exist here" in error_line(capfd)


def test_failed_reproduction_is_reported(committed_leaf, capfd):
    leaf = committed_leaf(recipes.FAILS_SECOND_TIME)
    original = run_leaf(leaf)
    code, out, _ = _reproduce(capfd, str(original))
    new = _new_run(leaf, original)
    assert code == 1 and f"reproduction run failed (exit code 1): {new}" in out
    assert manifest(new)["status"] == "failed"


# ------------------------------------------------------------------ the comparison itself


def test_compare_metrics_rules():
    a = [{"training_iteration": 1, "x": 1.0, "time_total_s": 3.0}]
    assert compare_metrics(
        a, [{"training_iteration": 1, "x": 1.0, "time_total_s": 9.0}]
    ).verdict == ("identical")
    near = compare_metrics(a, [{"training_iteration": 1, "x": 1.0 + 1e-9}])
    assert near.verdict == "within tolerance" and near.max_rel_diff == pytest.approx(1e-9, rel=1e-3)
    far = compare_metrics(a, [{"training_iteration": 1, "x": 1.1}])
    assert far.verdict == "different" and "row 1: x recorded 1.0, new 1.1" in far.differences
    missing = compare_metrics(a, [{"training_iteration": 1}])
    assert missing.verdict == "different" and "x missing in the new run" in missing.differences[0]
    longer = compare_metrics(a, a + a)
    assert longer.verdict == "different" and "recorded 1 rows, new run 2 rows" in longer.differences
    assert compare_metrics(a, [{"training_iteration": 1, "x": None}]).verdict == "different"


def test_compare_ignores_tune_trial_ids_and_order():
    recorded = [
        {"trial_id": "aaa_00000", "seed": 11, "training_iteration": 1, "r": 1.0},
        {"trial_id": "aaa_00001", "seed": 12, "training_iteration": 1, "r": 2.0},
    ]
    new = [
        {"trial_id": "bbb_00001", "seed": 12, "training_iteration": 1, "r": 2.0},
        {"trial_id": "bbb_00000", "seed": 11, "training_iteration": 1, "r": 1.0},
    ]
    assert compare_metrics(recorded, new).verdict == "identical"
    new[0]["r"] = 2.5
    assert compare_metrics(recorded, new).verdict == "different"
