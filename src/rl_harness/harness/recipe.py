"""Resolve a CLI target (dotted module path or experiment.py path) to a recipe's `run`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
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
