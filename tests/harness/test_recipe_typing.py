"""`context.settings` is the recipe's settings type to a type checker (issue 48 item 3): a leaf
writes `def run(context: RunContext[Budget])` and reads `context.settings.iterations` with no
re-assertion, and `Recipe(run=..., budgets=...)` refuses budgets of another type than its
`run` takes. Checked by mypy --strict on a leaf written here (slow: mypy reads the library's
modules the leaf imports)."""

from __future__ import annotations

from pathlib import Path

import pytest

LEAF = """
from dataclasses import dataclass

from rl_harness import Recipe, RunContext


@dataclass(frozen=True)
class Budget:
    iterations: int


@dataclass(frozen=True)
class Other:
    name: str


def run(context: RunContext[Budget]) -> dict[str, int]:
    reveal_type(context.settings)
    return {"iterations": context.settings.iterations}


def wrong(context: RunContext[Budget]) -> str:
    return context.settings.iterations


RECIPE = Recipe(run=run, budgets={"smoke": Budget(1)}, default="smoke")
reveal_type(RECIPE)
MISMATCHED = Recipe(run=run, budgets={"smoke": Other("x")}, default="smoke")
"""


@pytest.mark.slow
def test_context_settings_is_the_recipes_settings_type(tmp_path: Path):
    from mypy import api

    leaf = tmp_path / "leaf.py"
    leaf.write_text(LEAF)
    out, err, _ = api.run(
        ["--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), str(leaf)]
    )
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(str(leaf))]
    assert 'note: Revealed type is "leaf.Budget"' in lines, out + err
    assert 'note: Revealed type is "rl_harness.harness.recipe.Recipe[leaf.Budget]"' in lines
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 2, out
    assert 'Incompatible return value type (got "int", expected "str")' in errors[0]
    assert "MISMATCHED" not in errors[1] and "Other" in errors[1]  # budgets must match run
