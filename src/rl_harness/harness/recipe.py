"""Resolve a CLI target (dotted module path or experiment.py path) to a recipe's `run`."""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


class RecipeError(ValueError):
    """Bad target: the CLI prints this as one line, without a traceback."""


@dataclass(frozen=True)
class Recipe:
    module_name: str
    source_file: Path
    experiment_dir: Path
    run: Callable[[Any], Any]
    module: ModuleType | None = None  # where BUDGETS / DEFAULT_BUDGET are read (budgets.py)
    # The module's HEADLINE: result keys ("a/b" for nested ones) the closing line shows first.
    headline: tuple[str, ...] = ()


def _headline(module: ModuleType) -> tuple[str, ...]:
    headline = getattr(module, "HEADLINE", ())
    if isinstance(headline, str) or not all(isinstance(k, str) for k in headline):
        raise RecipeError(
            f"{module.__name__}.HEADLINE must be a tuple of result keys, got {headline!r}"
        )
    return tuple(headline)


def _dotted_name_for_file(path: Path) -> tuple[str, Path]:
    """The dotted module name of `path` and the folder that must be on sys.path for it."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(parts)), folder


def _import_dotted(name: str) -> ModuleType:
    try:
        spec = importlib.util.find_spec(name)
    except (ModuleNotFoundError, ValueError) as error:
        missing = getattr(error, "name", None) or name
        raise RecipeError(
            f"cannot find experiment module {name!r} (no module {missing!r})"
        ) from None
    if spec is None:
        raise RecipeError(f"cannot find experiment module {name!r}")
    if spec.submodule_search_locations is not None:
        raise RecipeError(
            f"{name!r} is a package, not an experiment module; did you mean {name}.experiment?"
        )
    return importlib.import_module(name)


def _import_file(path: Path) -> ModuleType:
    if not path.exists():
        raise RecipeError(f"no such experiment file: {path}")
    if path.is_dir():
        raise RecipeError(f"{path} is a directory; give the path to its experiment.py")
    if path.suffix != ".py":
        raise RecipeError(f"{path} is not a Python file")
    name, root = _dotted_name_for_file(path)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin and Path(spec.origin).resolve() == path:
        return importlib.import_module(name)
    # Another module of that name shadows the file: load the file itself.
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def looks_like_target(word: str) -> bool:
    """Targets always hold a '.' or a '/', tool subcommands never do."""
    return "." in word or "/" in word


# --show-settings reads these names only (budgets.py).
BUDGET_NAMES = ("BUDGETS", "DEFAULT_BUDGET")


class _NoSlice(Exception):
    """The budget declarations cannot be read on their own: import the recipe instead."""


def _bound(node: ast.stmt) -> set[str]:
    """The top-level names a statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(sub.name)
        elif isinstance(sub, ast.Import | ast.ImportFrom) and sub is not node:
            names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return names


def _used(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _slice(body: list[ast.stmt], wanted: set[str]) -> list[ast.stmt]:
    """The statements `wanted` needs, in order: walking back from the end, each statement that
    binds a needed name is kept and the names it reads become needed (`__future__` kept)."""
    needed, kept = set(wanted), []
    for node in reversed(body):
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (future or _bound(node) & needed):
            runs_now = not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            if runs_now and _used(node) & needed:  # `BUDGETS["x"] = ...`, `SMOKE.update()`
                raise _NoSlice(f"line {node.lineno} may change what is needed")
            continue
        if isinstance(node, ast.Import | ast.ImportFrom) and not future:
            # only the names needed: `from spec import BUDGETS, MODEL_CONFIG` takes BUDGETS
            names = [a for a in node.names if (a.asname or a.name).split(".")[0] in needed]
            node = copy.copy(node)
            node.names = names
        kept.append(node)
        needed |= _used(node)
    missing = wanted - set().union(*(_bound(node) for node in kept))
    if missing:
        raise _NoSlice(f"not bound at the top level: {sorted(missing)}")
    return kept[::-1]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _sliced_module(name: str, origin: str, wanted: set[str], made: dict[str, ModuleType]) -> None:
    """Run the statements of module `name` (source `origin`) that `wanted` needs, in a module
    registered under its name; a `from M import ...` of the same top-level package (the
    experiment repo's own modules) is sliced the same way, any other import runs as is."""
    tree = ast.parse(Path(origin).read_text(), filename=origin)
    kept = _slice(tree.body, wanted)
    package = name.rpartition(".")[0]
    top = name.split(".")[0]
    # Every name taken from each of the repo's own modules, over all its `from` imports (a
    # module imported by two statements is sliced once, for both).
    names_from: dict[str, set[str]] = {}
    for node in kept:
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        source = _absolute(node, package)
        if source.split(".")[0] != top or source in sys.modules or source in made:
            continue
        names_from.setdefault(source, set()).update(a.name for a in node.names)
    for source, names in names_from.items():
        spec = importlib.util.find_spec(source)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise _NoSlice(f"{source} has no Python source")
        if spec.submodule_search_locations is not None:
            raise _NoSlice(f"{source} is a package")
        _sliced_module(source, spec.origin, names, made)
    module = types.ModuleType(name)
    module.__file__ = origin
    module.__package__ = package
    made[name] = module
    sys.modules[name] = module  # dataclasses look their module up while being built
    exec(compile(ast.Module(body=kept, type_ignores=[]), origin, "exec"), module.__dict__)


def _recipe_source(target: str) -> tuple[str, str]:
    """(dotted module name, source file) of the target, without running the module itself
    (a dotted target's parent packages are imported, as any import does)."""
    if not looks_like_target(target):
        raise _NoSlice("not a target")
    if target.endswith(".py") or "/" in target or Path(target).exists():
        path = Path(target).resolve()
        if not path.is_file() or path.suffix != ".py":
            raise _NoSlice("not a file")
        name, root = _dotted_name_for_file(path)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        return name, str(path)
    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError) as error:
        raise _NoSlice(str(error)) from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise _NoSlice("no Python source")
    if spec.submodule_search_locations is not None:
        raise _NoSlice("a package")
    return target, spec.origin


@contextmanager
def budget_declarations(
    target: str, import_recipe: Callable[[], ModuleType]
) -> Iterator[ModuleType]:
    """A module holding the target's BUDGETS and DEFAULT_BUDGET, for `--show-settings`.

    Only the statements those names need run (the Budget dataclass, its instances, their
    imports; the experiment repo's own modules they come from sliced alike), so torch and
    RLlib, which recipes import at the top, stay unimported and the answer takes a second.
    When the declarations cannot be read apart (BUDGETS built at run time, a name from a
    package), `import_recipe()` imports it as a run would (RecipeError for a bad target). Modules
    registered meanwhile are removed on leaving: a later import gets the real ones.
    """
    before = dict(sys.modules)
    made: dict[str, ModuleType] = {}
    try:
        try:
            name, origin = _recipe_source(target)
            if name in sys.modules:  # already imported for real: read that one
                raise _NoSlice("imported")
            _sliced_module(name, origin, set(BUDGET_NAMES), made)
            module = made[name]
        except Exception:  # any failure of the slice: import the recipe, errors and all
            _put_back(made, before)
            made.clear()
            module = import_recipe()
        yield module
    finally:
        _put_back(made, before)


def _put_back(made: dict[str, ModuleType], before: dict[str, ModuleType]) -> None:
    for name in made:
        if before.get(name) is not None:
            sys.modules[name] = before[name]
        else:
            sys.modules.pop(name, None)


def load_recipe(target: str) -> Recipe:
    """Import the target and return its `run`. Raises RecipeError for bad input."""
    if not looks_like_target(target):
        raise RecipeError(
            f"{target!r} is neither a dotted module path nor a path to an experiment.py"
        )
    is_path = target.endswith(".py") or "/" in target or Path(target).exists()
    module = _import_file(Path(target).resolve()) if is_path else _import_dotted(target)
    run = getattr(module, "run", None)
    if run is None:
        raise RecipeError(f"experiment module {module.__name__!r} has no run(context) function")
    if not callable(run):
        raise RecipeError(f"{module.__name__}.run is not callable")
    source = Path(module.__file__ or "").resolve()
    return Recipe(module.__name__, source, source.parent, run, module, _headline(module))
