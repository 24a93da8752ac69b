"""Packaging hygiene: a typed package (py.typed in the wheel), a license, and lint in CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_is_typed_and_licensed(tmp_path: Path):
    uv = [sys.executable, "-m", "uv"] if shutil.which("uv") is None else ["uv"]
    built = subprocess.run(
        [*uv, "build", "--wheel", "--offline", "--out-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if built.returncode != 0 and "hatchling" in built.stderr and "offline" in built.stderr:
        pytest.skip("the build backend is not in uv's cache (offline machine)")
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("rl_harness-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        headers = archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "rl_harness/py.typed" in names
    assert "License-Expression: MIT" in headers


def test_ci_lints_beside_the_tests():
    steps = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.startswith("python3 -m uv run")
    ]
    assert steps == [
        "python3 -m uv run ruff check .",
        "python3 -m uv run ruff format --check .",
        "python3 -m uv run mypy  # strict on src/rl_harness ([tool.mypy] in pyproject.toml)",
        'python3 -m uv run pytest -q -m "not slow"',
    ]
