"""Layer dependency rules (docs/architecture.md), read from the source with `ast`, plus the
rule that every package carries an AGENTS.md. The rules allow exactly the imports the code
makes (no allowance unused), and the doc's layer table states the same rules.

An import counts wherever it sits (module level, inside a function, under TYPE_CHECKING), and
so does `importlib.import_module("literal")`; dispatch by a computed string is not an import
(the CLI, `rl_harness.cli`, the layer above all others, imports every command it runs).
`from rl_harness import X` counts as the root API, which re-exports harness.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "rl_harness"
LAYERS = ("harness", "learners", "losses", "analysis", "envs", "devops", "cli")
SEEDING, ROOT, EXPERIMENTS = "seeding", "root", "experiments"

# What each layer may import besides itself: exactly the imports the code makes
# (test_the_rules_allow_exactly_the_imports_made), as docs/architecture.md's table says.
# "root" is `rl_harness` (its lazy API is harness).
ALLOWED: dict[str, set[str]] = {
    "envs": {SEEDING},
    "learners": set(),
    "losses": {"learners"},
    "harness": {ROOT},
    "analysis": {"harness", SEEDING},
    "devops": {"harness"},
    "cli": {"harness", "analysis", "devops"},  # the command line, above all
}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    imported: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: imports {self.imported} ({self.reason})"


@dataclass(frozen=True)
class ImportSite:
    module: str
    line: int
    eager: bool  # executed on import: module level, not in a function or TYPE_CHECKING block


def _module_name(path: Path, package_root: Path) -> list[str]:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _absolute(node: ast.ImportFrom, here: list[str], is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = here if is_package else here[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_sites(path: Path, package_root: Path) -> list[ImportSite]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path, package_root)
    is_package = path.name == "__init__.py"
    sites: list[ImportSite] = []

    def visit(node: ast.AST, eager: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            eager = False
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, eager)
            return
        if isinstance(node, ast.Import):
            sites.extend(ImportSite(alias.name, node.lineno, eager) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, here, is_package)
            for alias in node.names:
                # `from rl_harness import envs` names a module; `import X` of a name does not.
                sites.append(ImportSite(f"{base}.{alias.name}", node.lineno, eager))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            sites.append(ImportSite(node.args[0].value, node.lineno, eager))
        for child in ast.iter_child_nodes(node):
            visit(child, eager)

    visit(tree, True)
    return sites


def target_of(module: str) -> str | None:
    """The layer an imported dotted name belongs to; None for third-party modules."""
    parts = module.split(".")
    if parts[0] == EXPERIMENTS:
        return EXPERIMENTS
    if parts[0] != "rl_harness":
        return None
    if len(parts) == 1 or parts[1] not in (*LAYERS, SEEDING):
        return ROOT
    return parts[1]


def check_tree(package_root: Path) -> list[Violation]:
    """Every import under `package_root` (a src/rl_harness folder) that breaks a rule."""
    violations = []
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        owner = relative.parts[0] if len(relative.parts) > 1 else ROOT
        shown = str(path.relative_to(package_root.parent.parent))
        for site in import_sites(path, package_root):
            target = target_of(site.module)
            if target is None:
                continue
            if target == EXPERIMENTS:
                reason = "the library never imports a named experiment"
            elif path == package_root / "seeding.py":
                reason = "seeding depends on NumPy only"
            elif owner == ROOT:
                if not site.eager or target in (ROOT, SEEDING):
                    continue
                reason = f"{relative} must import no layer when imported"
            elif target != owner and target not in ALLOWED[owner]:
                allowed = "".join(f", {name}" for name in sorted(ALLOWED[owner]))
                reason = f"{owner} may import only itself{allowed}"
            else:
                continue
            violations.append(Violation(shown, site.line, site.module, reason))
    return violations


def used_imports(package_root: Path) -> dict[str, set[str]]:
    """Each layer's imports of other layers (and seeding, root), as the code makes them."""
    used: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for path in package_root.rglob("*.py"):
        relative = path.relative_to(package_root)
        if len(relative.parts) == 1 or relative.parts[0] not in used:
            continue  # the root modules and seeding have their own rules
        owner = relative.parts[0]
        for site in import_sites(path, package_root):
            target = target_of(site.module)
            if target not in (None, owner, EXPERIMENTS):
                used[owner].add(target)
    return used


def documented_rules(text: str) -> dict[str, set[str]]:
    """The "may import" column of docs/architecture.md's layer table, per layer."""
    rules: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        package = re.match(r"`(\w+)/`", cells[0])
        if len(cells) == 3 and package and package[1] in LAYERS:
            names = set(re.findall(r"`(\w+)`", cells[2]))
            rules[package[1]] = names | ({ROOT} if "root API" in cells[2] else set())
    return rules


def test_layers_import_only_what_they_may():
    violations = check_tree(PACKAGE)
    assert not violations, "layer rule broken:\n" + "\n".join(map(str, violations))


def test_the_rules_allow_exactly_the_imports_made():
    """An allowance no code uses is a rule nobody checked: drop it (and from the docs)."""
    unused = {
        layer: sorted(ALLOWED[layer] - made)
        for layer, made in used_imports(PACKAGE).items()
        if ALLOWED[layer] - made
    }
    assert not unused, f"allowed but never imported: {unused}"


def test_the_architecture_doc_states_the_rules():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_rules(text) == ALLOWED


def _plant(root: Path, relative: str, source: str) -> None:
    path = root / "rl_harness" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in [path.parent, *path.parent.parents]:
        if folder == root:
            break
        (folder / "__init__.py").touch()
    path.write_text(source)


@pytest.mark.parametrize(
    ("relative", "source", "imported"),
    [
        ("envs/toy/env.py", "from rl_harness.harness.context import RunContext\n", "context"),
        ("envs/toy/env.py", "from ...learners import models\n", "rl_harness.learners.models"),
        ("envs/toy/env.py", "from rl_harness import RunContext\n", "rl_harness.RunContext"),
        ("harness/tool.py", "def f():\n    import rl_harness.envs.mess3\n", "envs.mess3"),
        (
            "harness/tool.py",
            "import importlib\nimportlib.import_module('rl_harness.envs.hmm')\n",
            "envs.hmm",
        ),
        ("analysis/probe.py", "from rl_harness.envs.mess3 import model\n", "envs.mess3"),
        ("analysis/probe.py", "import rl_harness.devops.vast\n", "devops.vast"),
        (
            "learners/m.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from rl_harness.envs.hmm import HMMEnv\n",
            "envs.hmm",
        ),
        ("losses/l.py", "from rl_harness.analysis import probes\n", "analysis.probes"),
        ("learners/m.py", "from rl_harness.losses import classification\n", "losses"),
        ("analysis/a.py", "from rl_harness.learners.models import base\n", "learners.models"),
        ("devops/d.py", "import rl_harness.learners\n", "learners"),
        ("harness/x.py", "from experiments.study.leaf import experiment\n", "experiments"),
        ("harness/x.py", "from rl_harness.cli import main\n", "rl_harness.cli.main"),
        ("analysis/a.py", "def f():\n    from rl_harness.cli.vast import main\n", "cli.vast"),
        ("cli/c.py", "from rl_harness.envs.mess3 import tasks\n", "envs.mess3"),
        ("__init__.py", "from rl_harness.harness.context import RunContext\n", "harness.context"),
        ("seeding.py", "import rl_harness\n", "rl_harness"),
    ],
)
def test_checker_catches_planted_violation(tmp_path: Path, relative, source, imported):
    _plant(tmp_path, relative, source)
    violations = check_tree(tmp_path / "rl_harness")
    assert len(violations) == 1, violations
    message = str(violations[0])
    assert f"/rl_harness/{relative}:" in message and imported in message


def test_checker_allows_what_the_rules_allow(tmp_path: Path):
    allowed = {
        "envs/toy/env.py": "from rl_harness.seeding import stream_rng\nfrom . import sampling\n",
        "envs/toy/sampling.py": "import numpy\nfrom rl_harness.envs.toy import env\n",
        "harness/cli.py": "import importlib\nNAME = 'rl_harness.devops.vast.cli'\n"
        "importlib.import_module(NAME)\nimport rl_harness\n",
        "analysis/a.py": "from rl_harness.harness.metrics import read_metrics\n"
        "from rl_harness.seeding import stream_rng\n",
        "losses/l.py": "from rl_harness.learners.aux_keys import AuxKeys\n",
        "devops/d.py": "from rl_harness.harness.redaction import redact\n",
        "cli/c.py": "from rl_harness.analysis.comparison import compare_runs\n"
        "from rl_harness.devops.vast import client\nfrom rl_harness.harness import lifecycle\n",
        "__init__.py": "def __getattr__(name):\n    import rl_harness.harness.context\n",
    }
    for relative, source in allowed.items():
        _plant(tmp_path, relative, source)
    assert check_tree(tmp_path / "rl_harness") == []


def test_used_imports_sees_each_layer_edge_once_wherever_it_sits(tmp_path: Path):
    planted = {
        "losses/l.py": "def f():\n    from rl_harness.learners.aux_keys import AuxKeys\n",
        "analysis/a.py": "from rl_harness.seeding import stream_rng\nfrom . import b\n",
        "analysis/b.py": "from experiments.study import leaf\nimport numpy\n",
        "cli/c.py": "import rl_harness\nimportlib.import_module('rl_harness.harness.layout')\n",
    }
    for relative, source in planted.items():
        _plant(tmp_path, relative, source)
    used = {layer: made for layer, made in used_imports(tmp_path / "rl_harness").items() if made}
    assert used == {"losses": {"learners"}, "analysis": {SEEDING}, "cli": {ROOT, "harness"}}


# ---------------------------------------------------------------------------- AGENTS.md


def package_dirs() -> list[Path]:
    """Each subpackage of src/rl_harness (a folder with __init__.py), and the starter repo."""
    folders = sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    return [*folders, REPO / "examples" / "rl-experiments"]


def test_every_package_has_agents_md():
    missing = [str(p.relative_to(REPO)) for p in package_dirs() if not (p / "AGENTS.md").is_file()]
    assert (REPO / "AGENTS.md").is_file(), "the repo root has no AGENTS.md"
    assert not missing, "packages without AGENTS.md: " + ", ".join(missing)
