"""Analysis reads modules and envs through public APIs only (encode, info, checkpoints)."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "src" / "rl_harness" / "analysis"


def private_reads(source: str) -> list[tuple[int, str]]:
    """`obj._name` where obj is not self/cls: a private attribute of someone else's object."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_checker_catches_private_reads():
    source = (
        "def f(module, env):\n    self._ok = 1\n    return module._encoder, env.unwrapped._state\n"
    )
    found = [text for _, text in private_reads(source)]
    assert found == ["module._encoder", "env.unwrapped._state"]
    assert private_reads("x.__class__\nself._cache\n") == []


def test_analysis_reads_no_private_attributes():
    offenders = [
        f"{path.relative_to(ANALYSIS)}:{line}: {text}"
        for path in sorted(ANALYSIS.rglob("*.py"))
        for line, text in private_reads(path.read_text())
    ]
    assert offenders == [], "analysis must use public APIs only:\n" + "\n".join(offenders)
