"""Provenance manifest: fields, two git identities, status transitions, atomic writes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness import atomic
from rl_harness.harness.provenance import library_root
from tests.harness import recipes


def _leaf(repo: Path, source: str, name: str = "leaf") -> Path:
    path = repo / "study" / name / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    return path


def _only_run(leaf: Path) -> Path:
    runs = sorted((leaf.parent / "results").iterdir())
    assert len(runs) == 1
    return runs[0]


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run_manifest.json").read_text())


def test_completed_manifest_has_every_field(git_repo, capsys):
    repo, git = git_repo
    leaf = _leaf(repo, recipes.QUICK)
    (repo / "uv.lock").write_text("version = 1\n")
    git("add", "-A")
    git("commit", "-qm", "add leaf")
    assert main([str(leaf), "--seed", "7", "--smoke"]) == 0
    run_dir = _only_run(leaf)
    m = _manifest(run_dir)

    assert m["status"] == "completed" and m["error"] is None
    assert m["run_id"] == run_dir.name and m["seed"] == 7
    assert m["options"]["seed"] == 7 and m["options"]["smoke"] is True
    assert m["options"]["hardware_profile"] == "cpu-local"
    assert m["experiment"]["source_file"] == str(leaf.resolve())
    assert m["experiment"]["source_sha256"] == hashlib.sha256(leaf.read_bytes()).hexdigest()
    assert m["experiment"]["relative_dir"] == "study/leaf"
    assert m["command"]["argv"][1:] == [str(leaf), "--seed", "7", "--smoke"]
    # The experiment repo and the library are two separate git identities.
    exp = m["experiment_repo"]
    assert exp["root"] == str(repo.resolve())
    assert exp["commit"] == git("rev-parse", "HEAD").strip()
    assert exp["branch"] == "main" and exp["dirty"] is False and exp["patch_file"] is None
    lib = m["library"]
    assert lib["version"] == "0.1.0" and lib["same_repo_as_experiment"] is False
    lib_head = subprocess.run(
        ["git", "-C", str(library_root()), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if lib_head.returncode == 0:  # installed from a git checkout
        assert lib["commit"] == lib_head.stdout.strip() != exp["commit"]
    assert m["lockfile"] == {
        "path": str(repo.resolve() / "uv.lock"),
        "sha256": hashlib.sha256(b"version = 1\n").hexdigest(),
    }
    assert set(m["versions"]) == {"python", "ray", "torch", "gymnasium", "numpy"}
    assert m["versions"]["ray"] == "2.60.0"
    hw = m["hardware"]
    for key in ("hostname", "os", "cpu_model", "cpu_count", "memory_bytes", "gpus", "plan"):
        assert key in hw
    assert hw["plan"]["profile"] == "cpu-local" and hw["plan"]["num_env_runners"] == 0
    started = dt.datetime.fromisoformat(m["started_at"])
    ended = dt.datetime.fromisoformat(m["ended_at"])
    assert started.tzinfo == dt.UTC and started <= ended
    assert m["duration_s"] == pytest.approx((ended - started).total_seconds(), abs=0.002)
    assert m["artifacts"]["local"] == str(leaf.parent.resolve() / "artifacts" / run_dir.name)
    assert (Path(m["artifacts"]["local"]) / "blob.bin").stat().st_size == 100
    # The recipe saw `running` while it ran, and its return value was kept.
    result = json.loads((run_dir / "result.json").read_text())
    assert result == {"seen_status": "running", "seed": 7, "smoke": True}


def test_dirty_tree_saves_its_patch(git_repo, capsys):
    repo, git = git_repo
    leaf = _leaf(repo, recipes.QUICK)
    git("add", "-A")
    git("commit", "-qm", "add leaf")
    (repo / "README.md").write_text("experiments, edited\n")
    (repo / "study" / "notes.py").write_text("UNCOMMITTED = True\n")
    assert main([str(leaf)]) == 0
    run_dir = _only_run(leaf)
    exp = _manifest(run_dir)["experiment_repo"]
    assert exp["dirty"] is True and exp["patch_file"] == "experiment_repo.patch"
    patch = (run_dir / "experiment_repo.patch").read_text()
    assert "+experiments, edited" in patch
    assert "+UNCOMMITTED = True" in patch  # untracked code is part of what ran
    assert exp["diff_sha256"] == hashlib.sha256(patch.encode()).hexdigest()
    assert "study/notes.py" in exp["untracked"]


def test_outside_git_repo_records_nulls(tmp_path: Path, capsys):
    leaf = _leaf(tmp_path, recipes.QUICK)
    assert main([str(leaf)]) == 0
    m = _manifest(_only_run(leaf))
    assert m["experiment_repo"]["commit"] is None and m["status"] == "completed"


def test_failing_recipe_records_error(tmp_path: Path, capsys):
    leaf = _leaf(tmp_path, recipes.FAILING)
    assert main([str(leaf)]) == 1
    run_dir = _only_run(leaf)
    m = _manifest(run_dir)
    assert m["status"] == "failed" and m["ended_at"] is not None
    assert m["error"]["type"] == "RuntimeError"
    assert m["error"]["message"] == "the recipe broke on purpose"
    assert "RuntimeError" in (run_dir / m["error"]["traceback_file"]).read_text()
    assert "the recipe broke on purpose" in capsys.readouterr().err


def test_keyboard_interrupt_in_recipe_is_interrupted(tmp_path: Path, capsys):
    leaf = _leaf(tmp_path, recipes.KEYBOARD)
    assert main([str(leaf)]) == 130
    m = _manifest(_only_run(leaf))
    assert m["status"] == "interrupted" and m["error"]["type"] == "KeyboardInterrupt"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_marks_run_interrupted(tmp_path: Path, signum: int, code: int):
    leaf = _leaf(tmp_path, recipes.SLEEPY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rl_harness.cli", str(leaf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 60
    results = leaf.parent / "results"
    while not (results.exists() and any(results.glob("*/started"))):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    run_dir = _only_run(leaf)
    assert _manifest(run_dir)["status"] == "running"
    os.kill(proc.pid, signum)
    assert proc.wait(timeout=60) == code
    m = _manifest(run_dir)
    assert m["status"] == "interrupted"
    assert signal.Signals(signum).name in m["error"]["message"] or m["error"]["type"] == (
        "KeyboardInterrupt"
    )


def test_atomic_write_keeps_old_file_on_crash(tmp_path: Path, monkeypatch):
    target = tmp_path / "run_manifest.json"
    atomic.write_json_atomic(target, {"status": "running"})

    def crash(*_args, **_kwargs):
        raise OSError("disk vanished mid-rename")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(OSError):
        atomic.write_json_atomic(target, {"status": "completed"})
    assert json.loads(target.read_text()) == {"status": "running"}
    assert [p.name for p in tmp_path.iterdir()] == ["run_manifest.json"]  # no temp left over


def test_atomic_write_replaces_whole_file(tmp_path: Path):
    target = tmp_path / "x.json"
    atomic.write_json_atomic(target, {"a": "x" * 10_000})
    atomic.write_json_atomic(target, {"b": 1})
    assert json.loads(target.read_text()) == {"b": 1}


def test_results_and_artifacts_dirs_can_be_overridden(tmp_path: Path, capsys):
    leaf = _leaf(tmp_path, recipes.QUICK)
    res, art = tmp_path / "R", tmp_path / "A"
    argv = [str(leaf), "--results-dir", str(res), "--artifacts-dir", str(art), "--run-id", "r1"]
    code = main(argv)
    assert code == 0
    assert (res / "r1" / "run_manifest.json").exists() and (art / "r1" / "blob.bin").exists()
    assert not (leaf.parent / "results").exists()


def test_records_follow_the_umask(tmp_path: Path, capsys):
    """Teammates on a shared machine can read the records (not the 0600 of a temp file)."""
    leaf = _leaf(tmp_path, recipes.QUICK)
    previous = os.umask(0o022)
    try:
        assert main([str(leaf)]) == 0
    finally:
        os.umask(previous)
    run_dir = _only_run(leaf)
    modes = {p.name: p.stat().st_mode & 0o777 for p in run_dir.iterdir() if p.is_file()}
    assert modes["run_manifest.json"] == modes["result.json"] == 0o644
    assert set(modes.values()) == {0o644}


THREADS_RECIPE = """
import torch


def run(context):
    torch.set_num_threads(1)
    return {"threads": torch.get_num_threads()}
"""


def test_manifest_records_the_thread_settings(tmp_path: Path, monkeypatch, capsys):
    # Float results can depend on the thread count: the record says what it was, at the end
    # as the recipe left it.
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    import torch

    before = torch.get_num_threads()
    leaf = _leaf(tmp_path, THREADS_RECIPE)
    try:
        assert main([str(leaf), "--smoke"]) == 0
    finally:
        torch.set_num_threads(before)
    threads = _manifest(_only_run(leaf))["hardware"]["threads"]
    assert threads == {
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": None,
        "torch_intra_op_threads": 1,
    }


def test_load_manifest_reads_any_folder_in_one_line_errors(tmp_path: Path):
    """`load_manifest` (every reader's path to a manifest): None without one, a one-line
    RecordReadError naming the file for a corrupt one or one that holds no object."""
    from rl_harness.harness.manifest import load_manifest, write_manifest

    assert load_manifest(tmp_path) is None
    write_manifest(tmp_path, {"run_id": "r", "status": "completed"})
    assert load_manifest(tmp_path) == {"run_id": "r", "status": "completed"}
    path = tmp_path / "run_manifest.json"
    for text, reason in (("{", r"corrupt \(not valid JSON"), ("[1]", "does not hold a manifest")):
        path.write_text(text)
        with pytest.raises(atomic.RecordReadError, match=reason) as caught:
            load_manifest(tmp_path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(atomic.RecordReadError, match="not UTF-8 text"):
        load_manifest(tmp_path)
