"""A recipe's budget, chosen by name: `rl-harness TARGET --budget NAME [--set KEY=VALUE]...`.

A recipe declares its budgets (the science of how long and how big, owned by the recipe) as
frozen-dataclass instances of one type, and which one runs by default, in its `RECIPE`
(recipe.py):

    RECIPE = Recipe(run=run, budgets={"smoke": SMOKE, "cpu": CPU, "full": FULL}, default="cpu")

`resolve_budget` picks one by name (the checked options' `budget`: `--smoke` is already
`--budget smoke` there, context.py), applies `--set` overrides to its fields (each value
parsed by the field's type: int, float, bool, str, a tuple of those, or one of them
`| None`), and returns a `BudgetChoice`; the harness does it before any folder or Ray exists
and hands the recipe `context.budget` (the name) and `context.settings` (the resolved
instance). Nothing here looks at the hardware: a GPU host runs the budget it is asked for. A
recipe without budgets gets `settings=None` and accepts only `--smoke` or no budget at all.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl_harness.harness.recipe import Recipe

SMOKE_BUDGET = "smoke"
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class BudgetError(ValueError):
    """A budget name or override the recipe does not declare or cannot take (one CLI line)."""


@dataclass(frozen=True)
class BudgetChoice:
    """The budget a run uses: its name, the resolved settings, and the overrides applied."""

    name: str | None  # None: the recipe declares no budgets and no --smoke was given
    settings: Any = None  # the recipe's frozen dataclass instance (overrides applied)
    overrides: dict[str, Any] = field(default_factory=dict)  # field -> parsed value

    def record(self) -> dict[str, Any]:
        """What the manifest and config.json keep (`budget`)."""
        settings = dataclasses.asdict(self.settings) if self.settings is not None else None
        return {"name": self.name, "settings": settings, "overrides": dict(self.overrides)}


def split_override(text: str) -> tuple[str, str]:
    """`KEY=VALUE` -> (KEY, VALUE); BudgetError for text without `=` or a key."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise BudgetError(f"--set takes KEY=VALUE (a field of the recipe's budget), got {text!r}")
    return key.strip(), value


def _type_name(kind: Any) -> str:
    return kind.__name__ if isinstance(kind, type) else str(kind).replace("typing.", "")


def parse_value(text: str, kind: Any) -> Any:
    """`text` as a value of the field type `kind`; ValueError (the reason) if it is not one."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == len(args) - 1 and text.strip().lower() == "none":
            return None
        if len(rest) != 1:
            raise ValueError(f"--set cannot parse the type {_type_name(kind)}")
        return parse_value(text, rest[0])
    if origin is tuple:
        if not text.strip():  # `--set hidden=` is a slip far more often than a wish for ()
            raise ValueError("expected comma-separated values, got nothing")
        parts = [part.strip() for part in text.split(",")]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(parse_value(part, args[0]) for part in parts)
        if len(parts) != len(args):
            raise ValueError(f"expected {len(args)} comma-separated values")
        return tuple(parse_value(part, arg) for part, arg in zip(parts, args, strict=True))
    if kind is bool:
        word = text.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise ValueError("expected true or false")
    if kind is int:
        try:
            return int(text.strip(), 10)
        except ValueError:
            raise ValueError("expected an integer") from None
    if kind is float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError("expected a number") from None
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    if kind is str:
        return text
    raise ValueError(f"--set cannot parse the type {_type_name(kind)}")


def _example(kind: Any) -> str:
    """A value of type `kind` as `--set` writes it (for error lines)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        return " or ".join([_example(a) for a in rest] + ["none"] * (len(rest) < len(args)))
    if origin is tuple:
        items = [args[0], args[0]] if len(args) == 2 and args[1] is Ellipsis else list(args)
        return ",".join(_example(a) for a in items)
    return {bool: "true", int: "3", float: "0.5", str: "text"}.get(kind, "?")


def syntax_hint(key: str, kind: Any) -> str:
    """How `--set` writes a value of `key`'s type, e.g. "write hidden=3,3" (tuples, unions)."""
    origin = typing.get_origin(kind)
    if origin not in (tuple, types.UnionType, typing.Union):
        return ""
    examples = _example(kind).split(" or ")
    return "; write " + " or ".join(f"{key}={e}" for e in examples)


def field_types(settings: Any) -> dict[str, Any]:
    """Field name -> its (evaluated) type annotation, in declaration order."""
    hints = typing.get_type_hints(type(settings))
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(settings)}


def apply_overrides(
    settings: Any, overrides: Sequence[str], *, where: str
) -> tuple[Any, dict[str, Any]]:
    """`settings` with each `KEY=VALUE` applied (parsed by the field's type); BudgetError
    naming the key and the accepted ones for an unknown key, or the type for a bad value."""
    kinds = field_types(settings)
    parsed: dict[str, Any] = {}
    for text in overrides:
        key, value = split_override(text)
        if key in parsed:
            raise BudgetError(f"--set {key} is given twice")
        if key not in kinds:
            raise BudgetError(f"unknown setting {key!r} for {where}; settings: {', '.join(kinds)}")
        try:
            parsed[key] = parse_value(value, kinds[key])
        except ValueError as error:
            raise BudgetError(
                f"--set {key}={value}: {error} ({key} is {_type_name(kinds[key])}"
                f"{syntax_hint(key, kinds[key])})"
            ) from None
    return (dataclasses.replace(settings, **parsed) if parsed else settings), parsed


def resolve_budget(
    recipe: Recipe[Any], name: str | None = None, overrides: Sequence[str] = (), *, owner: str
) -> BudgetChoice:
    """The budget `name` of the recipe `owner` declares (its default when None; "smoke" for
    `--smoke`: the options were normalised before, RunOptions.checked), with `overrides`
    applied. BudgetError for a name or key it does not have."""
    if not recipe.budgets:
        if name not in (None, SMOKE_BUDGET):
            raise BudgetError(
                f"{owner} declares no budgets, so it has no budget {name!r} "
                "(only --smoke or its own default)"
            )
        if overrides:
            raise BudgetError(f"{owner} declares no budgets: --set has nothing to set")
        return BudgetChoice(name)
    if name is None:
        assert recipe.default is not None  # Recipe checks it names one of its budgets
        name = recipe.default
    if name not in recipe.budgets:
        raise BudgetError(
            f"{owner} has no budget {name!r}; its budgets: {', '.join(recipe.budgets)}"
        )
    settings, parsed = apply_overrides(
        recipe.budgets[name], overrides, where=f"budget {name!r} of {owner}"
    )
    return BudgetChoice(name, settings, parsed)


def settings_text(recipe: Recipe[Any], owner: str, chosen: BudgetChoice | None = None) -> str:
    """`--show-settings`: each field with its type and its value in every budget (the
    default marked `*`), and the chosen budget's values when `--budget`/`--set` were given."""
    from rl_harness.harness.console import text_table

    if not recipe.budgets:
        return (
            f"{owner} declares no budgets: it runs its own default, or --smoke "
            "(declare RECIPE = Recipe(run=run, budgets=..., default=...) to choose and "
            "override settings)"
        )
    budgets, default = recipe.budgets, recipe.default
    assert default is not None  # Recipe checks it names one of its budgets
    kinds = field_types(budgets[default])
    header = ["setting", "type", *(f"{n}*" if n == default else n for n in budgets)]
    columns = list(budgets.values())
    if chosen is not None and chosen.overrides:
        header.append(f"{chosen.name} + --set")
        columns.append(chosen.settings)
    rows = [
        [key, _type_name(kind), *(repr(getattr(b, key)) for b in columns)]
        for key, kind in kinds.items()
    ]
    lines = [
        f"{owner}: budgets {', '.join(budgets)} (* default; --budget NAME picks one, "
        "--set KEY=VALUE changes a setting)",
        text_table(header, rows),
    ]
    return "\n".join(lines)
