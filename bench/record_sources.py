"""A run's source hashing (`provenance.imported_sources`) with torch and RLlib imported, as in
every run: the string-prefix scan over cached real paths vs the pathlib scan it replaced.

Run: .venv/bin/python bench/record_sources.py [--rounds 5]

Both scan the same `sys.modules` for the library's own files (what every run records twice,
at its start and its end, for the library and the experiment repo); CPU seconds per scan,
median of `--rounds`, measured side by side in one run. The pathlib scan is kept here only
as the reference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import ray.rllib.algorithms.ppo  # noqa: F401  (the modules a run has imported)
import torch  # noqa: F401

from rl_harness.harness.provenance import imported_sources, library_root, sha256_file


def pathlib_scan(root: Path, *, exclude: Path | None = None) -> dict[str, str]:
    """The scan before issue 51 (Path.resolve and is_relative_to for every module)."""
    root = Path(root).resolve()
    sources: dict[str, str] = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        if not path.is_relative_to(root) or (exclude is not None and path.is_relative_to(exclude)):
            continue
        relative = path.relative_to(root)
        if "site-packages" in relative.parts or any(p.startswith(".") for p in relative.parts):
            continue
        if path.is_file():
            sources[relative.as_posix()] = sha256_file(path)
    return dict(sorted(sources.items()))


def cpu_seconds(scan, root: Path) -> float:
    began = time.process_time()
    scan(root)
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    root = library_root()
    assert imported_sources(root) == pathlib_scan(root), "the two scans disagree"
    new, old = [], []
    for _ in range(rounds):  # in turn, so load changes hit both alike
        new.append(cpu_seconds(imported_sources, root))
        old.append(cpu_seconds(pathlib_scan, root))
    print(f"modules imported: {len(sys.modules)}")
    print(f"pathlib scan:        {statistics.median(old):.3f} CPU s per scan")
    print(f"string-prefix scan:  {statistics.median(new):.3f} CPU s per scan")
    print(f"ratio: {statistics.median(old) / statistics.median(new):.1f}x (4 scans per run)")


if __name__ == "__main__":
    main()
