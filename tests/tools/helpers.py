"""Shared steps of the run-tool tests: write a leaf into a git repo, run it, find its runs."""

from __future__ import annotations

import json
from pathlib import Path

from rl_harness.cli import main


def write_leaf(repo: Path, source: str, name: str = "leaf") -> Path:
    path = repo / "study" / name / "experiment.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def run_dirs(leaf: Path) -> list[Path]:
    results = leaf.parent / "results"
    return (
        sorted(results.iterdir(), key=lambda p: manifest(p)["started_at"])
        if results.exists()
        else []
    )


def run_leaf(leaf: Path, *options: str) -> Path:
    """Run the recipe in-process through the CLI; returns its results/<run-id>/ folder."""
    before = set(run_dirs(leaf))
    assert main([str(leaf), *options]) in (0, 1)
    (new,) = set(run_dirs(leaf)) - before
    return new


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run_manifest.json").read_text())


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "nothing on stderr"
    assert err[-1].startswith("rl-harness: error: "), err
    return err[-1]
