"""The public API a researcher sees: the lazy exports of `rl_harness` and
`rl_harness.analysis` match their `TYPE_CHECKING` imports (what IDEs read), the public JSON
writer, and recipes in examples/ that import no `rl_harness.harness` internals.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

from tests.test_architecture import REPO, _is_type_checking, import_sites

PACKAGES = {
    "rl_harness": REPO / "src" / "rl_harness" / "__init__.py",
    "rl_harness.analysis": REPO / "src" / "rl_harness" / "analysis" / "__init__.py",
}
EXAMPLES = REPO / "examples" / "rl-experiments" / "experiments"


def type_checking_imports(path: Path) -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute) of each import under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    blocks = [n for n in tree.body if isinstance(n, ast.If) and _is_type_checking(n.test)]
    assert len(blocks) == 1, f"{path}: expected one `if TYPE_CHECKING:` block"
    names: dict[str, tuple[str, str]] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 0, ast.unparse(node)
        for alias in node.names:
            names[alias.asname or alias.name] = (node.module or "", alias.name)
    return names


def lazy_exports(module) -> dict[str, tuple[str, str]]:
    """`_EXPORTS` as name -> (module, attribute); a bare module path means the same name."""
    return {
        name: (target, name) if isinstance(target, str) else target
        for name, target in module._EXPORTS.items()
    }


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_type_checking_imports_mirror_the_lazy_exports(package):
    module = importlib.import_module(package)
    exports = lazy_exports(module)
    assert type_checking_imports(PACKAGES[package]) == exports
    assert module.__all__ == sorted(exports)
    for name, (source, attribute) in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), attribute)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        module.nope  # noqa: B018


def test_a_lazy_export_missing_from_type_checking_is_caught(tmp_path):
    planted = tmp_path / "__init__.py"
    source = PACKAGES["rl_harness"].read_text(encoding="utf-8")
    planted.write_text(source.replace("    from rl_harness.harness.atomic import", "    # "))
    exports = lazy_exports(importlib.import_module("rl_harness"))
    mirrored = type_checking_imports(planted)
    assert set(exports) - set(mirrored) == {"write_json"}


def test_write_json_is_public_pretty_and_key_sorted(tmp_path):
    from rl_harness import write_json

    path = tmp_path / "deep" / "probe.json"
    write_json(path, {"b": [1, 2.5], "a": {"z": None, "y": Path("x")}})
    assert path.read_text() == (
        '{\n  "a": {\n    "y": "x",\n    "z": null\n  },\n  "b": [\n    1,\n    2.5\n  ]\n}\n'
    )
    assert json.loads(path.read_text()) == {"a": {"y": "x", "z": None}, "b": [1, 2.5]}
    assert [p.name for p in path.parent.iterdir()] == ["probe.json"]  # no temp file left


def harness_internals(root: Path) -> list[str]:
    """`file:line: module` for each import of rl_harness.harness(.x) under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for site in import_sites(path, root):
            if site.module == "rl_harness.harness" or site.module.startswith("rl_harness.harness."):
                found.append(f"{path.relative_to(root.parent)}:{site.line}: {site.module}")
    return found


def test_recipes_in_examples_import_no_harness_internals():
    assert list(EXAMPLES.rglob("experiment.py")), "no recipes found"
    internals = harness_internals(EXAMPLES)
    assert not internals, "use `from rl_harness import ...` instead:\n" + "\n".join(internals)


def test_the_examples_check_catches_a_planted_internal_import(tmp_path):
    leaf = tmp_path / "experiments" / "study" / "leaf"
    leaf.mkdir(parents=True)
    (leaf / "experiment.py").write_text(
        "from rl_harness import RunContext\n"
        "def run(context):\n"
        "    from rl_harness.harness.atomic import write_json_atomic\n"
    )
    assert harness_internals(tmp_path / "experiments") == [
        "experiments/study/leaf/experiment.py:3: rl_harness.harness.atomic.write_json_atomic"
    ]
