"""A recipe's declaration (`Recipe`: its run, budgets, default budget and headline, under the
one module name `RECIPE`), and a CLI target (dotted module path or experiment.py path)
resolved to it (`load_recipe`). The harness reads a leaf only through its `RECIPE`."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from rl_harness.harness.console import get_logger

if TYPE_CHECKING:
    from rl_harness.harness.context import RunContext

log = get_logger(__name__)

S = TypeVar("S", default=Any)  # the settings type; a bare Recipe is Recipe[Any]
RECIPE_NAME = "RECIPE"  # the one module attribute the harness reads
# The module attributes the harness read before RECIPE: a leaf declaring them without RECIPE
# is refused with the migration, never half-read.
OLD_NAMES = ("BUDGETS", "DEFAULT_BUDGET", "HEADLINE")
MIGRATION = "docs/migrating.md, 'One RECIPE per leaf'"


class RecipeError(ValueError):
    """Bad target: the CLI prints this as one line, without a traceback."""


@runtime_checkable
class DeclaredStage(Protocol):
    """An analysis stage as the harness sees it in `Recipe(stages=...)`: a named step
    (`rl_harness.analysis.AnalysisStage`; `rl-harness analyze` runs them). A Protocol, so
    the harness never imports `analysis`."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class Recipe(Generic[S]):
    """What a leaf hands the harness, declared once as `RECIPE = Recipe(run=run, ...)`.

    `budgets`: name -> settings (frozen-dataclass instances of one type S), the one chosen
    by `--budget NAME` / `--smoke` (= "smoke") / `default`, `--set` applied, reaches `run` as
    `context.settings` (typed S); none declared: `context.settings` is None and only
    `--smoke` or no budget is accepted. `headline`: result metric names (`Results`) the
    closing line and `compare` show first. `stages`: the leaf's analysis, in order
    (`rl_harness.analysis.AnalysisStage`s: what its `run` calls after training and
    `rl-harness analyze` runs on a finished run). Checked when built (RecipeError).
    """

    run: Callable[[RunContext[S]], Any]
    budgets: Mapping[str, S] = field(default_factory=dict)
    default: str | None = None  # a name in budgets; required when there are budgets
    headline: tuple[str, ...] = ()
    stages: tuple[DeclaredStage, ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.run):
            raise RecipeError(
                f"Recipe(run=...) must be the run(context) function, got {self.run!r}"
            )
        if not isinstance(self.budgets, Mapping):
            raise RecipeError(
                f"Recipe(budgets=...) must be a dict of name -> settings, got {self.budgets!r}"
            )
        values = list(self.budgets.values())
        if len({type(v) for v in values}) > 1 or not all(
            dataclasses.is_dataclass(v) and not isinstance(v, type) for v in values
        ):
            raise RecipeError("Recipe(budgets=...) must hold instances of one dataclass")
        if values and (not isinstance(self.default, str) or self.default not in self.budgets):
            raise RecipeError(
                f"Recipe(default=...) must name one of its budgets ({', '.join(self.budgets)}), "
                f"got {self.default!r}"
            )
        if not values and self.default is not None:
            raise RecipeError(
                f"Recipe(default={self.default!r}) names a budget, but none are declared"
            )
        headline = self.headline
        if isinstance(headline, str | bytes) or not all(isinstance(k, str) for k in headline):
            raise RecipeError(
                f"Recipe(headline=...) must be a tuple of result keys, got {headline!r}"
            )
        stages = self.stages
        if not isinstance(stages, tuple) or not all(isinstance(s, DeclaredStage) for s in stages):
            raise RecipeError(
                f"Recipe(stages=...) must be a tuple of analysis stages, got {stages!r}"
            )
        names = [stage.name for stage in stages]
        if len(set(names)) != len(names):
            raise RecipeError(f"Recipe(stages=...) repeats a stage name: {', '.join(names)}")
        object.__setattr__(self, "budgets", dict(self.budgets))
        object.__setattr__(self, "headline", tuple(headline))


def declared_recipe(module: ModuleType) -> Recipe[Any]:
    """The module's `RECIPE`. RecipeError for a module without one: naming the migration when
    it declares the old module attributes (BUDGETS, DEFAULT_BUDGET, HEADLINE). A module with
    only `run(context)` (no budgets, no headline) still runs, with a deprecation note."""
    name = module.__name__
    recipe = getattr(module, RECIPE_NAME, None)
    if isinstance(recipe, Recipe):
        return recipe
    if recipe is not None:
        raise RecipeError(
            f"{name}.{RECIPE_NAME} must be a rl_harness.Recipe, got {type(recipe).__name__}"
        )
    old = [attribute for attribute in OLD_NAMES if hasattr(module, attribute)]
    if old:
        raise RecipeError(
            f"{name} declares {', '.join(old)} but no {RECIPE_NAME}: the harness reads only "
            f"{RECIPE_NAME} = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, "
            f"headline=HEADLINE) now ({MIGRATION})"
        )
    run = getattr(module, "run", None)
    if run is None:
        raise RecipeError(
            f"experiment module {name!r} has no {RECIPE_NAME} "
            f"(declare {RECIPE_NAME} = Recipe(run=run) under its run(context) function)"
        )
    if not callable(run):
        raise RecipeError(f"{name}.run is not callable")
    # A note on the console's run lines (stdout), not stderr: a refused run's stderr stays
    # its one error line.
    log.info(
        f"note: {name} has no {RECIPE_NAME}: reading its run() alone is deprecated and will "
        f"stop; add {RECIPE_NAME} = Recipe(run=run) ({MIGRATION})"
    )
    return Recipe(run=run)


@dataclass(frozen=True)
class LoadedRecipe:
    """A target imported: its module, where it lives, and its declaration."""

    module_name: str
    source_file: Path
    experiment_dir: Path
    declared: Recipe[Any]
    module: ModuleType

    @property
    def headline(self) -> tuple[str, ...]:
        return self.declared.headline


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


# Recipe's fields in order (a positional `Recipe(run, budgets, ...)` read statically) and the
# name the sliced declarations are bound to.
_FIELDS = ("run", "budgets", "default", "headline")
_DECLARED = "__rl_harness_declared__"


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


def _recipe_arguments(body: list[ast.stmt]) -> tuple[list[ast.stmt], dict[str, ast.expr]]:
    """The module body without its one `RECIPE = Recipe(...)` statement, and that call's
    arguments by field name (`_NoSlice` when there is no such literal call)."""
    found = []
    for index, node in enumerate(body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == RECIPE_NAME for t in targets):
            found.append((index, value))
    if len(found) != 1:
        raise _NoSlice(f"{len(found)} {RECIPE_NAME} assignments")
    index, call = found[0]
    if not isinstance(call, ast.Call) or len(call.args) > len(_FIELDS):
        raise _NoSlice(f"{RECIPE_NAME} is not a Recipe(...) call")
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        raise _NoSlice(f"{RECIPE_NAME}'s arguments are unpacked")
    arguments = dict(zip(_FIELDS, call.args, strict=False))
    arguments |= {k.arg: k.value for k in call.keywords if k.arg is not None}
    return body[:index] + body[index + 1 :], arguments


def _declarations(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements `RECIPE`'s budgets, default and headline need (its `run` is not read:
    its body uses the torch and RLlib this avoids), then one binding the three to _DECLARED."""
    rest, arguments = _recipe_arguments(body)
    empty: dict[str, ast.expr] = {
        "budgets": ast.Dict([], []),
        "default": ast.Constant(None),
        "headline": ast.Tuple([], ast.Load()),
    }
    values = [arguments.get(name, value) for name, value in empty.items()]
    bind = ast.Assign(
        targets=[ast.Name(_DECLARED, ast.Store())], value=ast.Tuple(values, ast.Load())
    )
    bind.lineno = bind.end_lineno = body[-1].end_lineno or body[-1].lineno
    bind.col_offset = bind.end_col_offset = 0
    ast.fix_missing_locations(bind)
    return [*_slice(rest, _used(bind)), bind]


def _sliced_module(
    name: str,
    origin: str,
    wanted: set[str],
    made: dict[str, ModuleType],
    *,
    declaration: bool = False,
) -> None:
    """Run the statements of module `name` (source `origin`) that `wanted` needs (with
    `declaration`: those its RECIPE's budgets, default and headline need), in a module
    registered under its name; a `from M import ...` of the same top-level package (the
    experiment repo's own modules) is sliced the same way, any other import runs as is."""
    tree = ast.parse(Path(origin).read_text(), filename=origin)
    if declaration:
        kept = _declarations(tree.body)
    else:  # a leaf's names taken by another (a HEADLINE): its RECIPE only reads them
        try:
            body = _recipe_arguments(tree.body)[0]
        except _NoSlice:
            body = tree.body
        kept = _slice(body, wanted)
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


def _literal_strings(node: ast.expr) -> tuple[str, ...] | None:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(value, tuple | list) and all(isinstance(k, str) for k in value):
        return tuple(value)
    return None


def _static_name(source: Path, name: str, depth: int) -> tuple[str, ...] | None:
    """The literal tuple of strings the top-level `name` of `source` is: assigned there, or
    imported (`from M import name`) from another file of its experiment repo, read alike."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return _literal_strings(node.value)
        if isinstance(node, ast.ImportFrom) and depth > 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    dotted, root = _dotted_name_for_file(source)
                    module = _absolute(node, dotted.rpartition(".")[0])
                    path = root.joinpath(*module.split(".")).with_suffix(".py")
                    return _static_name(path, alias.name, depth - 1) if path.is_file() else None
    return None


def static_headline(source: Path) -> tuple[str, ...]:
    """The headline a recipe's source declares, read with `ast`, never imported (`compare`'s
    default metrics): `RECIPE = Recipe(..., headline=...)` given as a literal, or as a name
    bound to one in that file or imported from another of its experiment repo. () when it
    declares none or it cannot be read so."""
    try:
        body = ast.parse(source.read_text(encoding="utf-8")).body
        try:
            _, arguments = _recipe_arguments(body)
        except _NoSlice:  # a leaf from before RECIPE (its runs still compare): its HEADLINE
            return _static_name(source, "HEADLINE", depth=0) or ()
        headline = arguments.get("headline")
        if headline is None:
            return ()
        if isinstance(headline, ast.Name):
            return _static_name(source, headline.id, depth=3) or ()
        return _literal_strings(headline) or ()
    except (OSError, SyntaxError, ValueError, _NoSlice):
        return ()


def _not_run(context: Any) -> None:
    raise RuntimeError("a recipe read for --show-settings does not run")


@contextmanager
def budget_declarations(
    target: str, import_recipe: Callable[[], tuple[str, Recipe[Any]]]
) -> Iterator[tuple[str, Recipe[Any]]]:
    """(module name, its RECIPE's budgets, default and headline) for `--show-settings`.

    Only the statements those need run (the Budget dataclass, its instances, their imports;
    the experiment repo's own modules they come from sliced alike), never `run`, so torch
    and RLlib, which recipes import at the top, stay unimported and the answer takes a
    second. When they cannot be read apart (no literal `RECIPE = Recipe(...)`, budgets built
    at run time, a name from a package), `import_recipe()` imports it as a run would
    (RecipeError for a bad target). Modules registered meanwhile are removed on leaving: a
    later import gets the real ones.
    """
    before = dict(sys.modules)
    made: dict[str, ModuleType] = {}
    try:
        try:
            name, origin = _recipe_source(target)
            if name in sys.modules:  # already imported for real: read that one
                raise _NoSlice("imported")
            _sliced_module(name, origin, set(), made, declaration=True)
            budgets, default, headline = vars(made[name])[_DECLARED]
            declared = (name, Recipe(_not_run, budgets, default, headline))
        except Exception:  # any failure of the slice: import the recipe, errors and all
            _put_back(made, before)
            made.clear()
            declared = import_recipe()
        yield declared
    finally:
        _put_back(made, before)


def _put_back(made: dict[str, ModuleType], before: dict[str, ModuleType]) -> None:
    for name in made:
        if before.get(name) is not None:
            sys.modules[name] = before[name]
        else:
            sys.modules.pop(name, None)


def load_recipe(target: str) -> LoadedRecipe:
    """Import the target and read its RECIPE. Raises RecipeError for bad input."""
    if not looks_like_target(target):
        raise RecipeError(
            f"{target!r} is neither a dotted module path nor a path to an experiment.py"
        )
    is_path = target.endswith(".py") or "/" in target or Path(target).exists()
    module = _import_file(Path(target).resolve()) if is_path else _import_dotted(target)
    declared = declared_recipe(module)
    source = Path(module.__file__ or "").resolve()
    return LoadedRecipe(module.__name__, source, source.parent, declared, module)
