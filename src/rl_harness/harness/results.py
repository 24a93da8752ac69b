"""A run's headline numbers as named scalars: what result.json holds and `compare` reads.

A study declares each metric where it computes it, once, by name:

    results = Results()
    results.add("return_per_step/greedy", 0.31)
    results.add("probe_r2", Metric.of(record["probe"]["r2_pooled"]))   # {value, low, high}
    return results                      # the harness writes result.json (`Results.to_json`)

result.json then reads

    {"format": "rl_harness.results/1",
     "metrics": {"probe_r2": {"value": 0.867, "low": 0.862, "high": 0.872},
                 "return_per_step/greedy": {"value": 0.31}},
     "notes": {...}}

A name is any text ("/" only groups names for people and for the closing line's headline);
a value is a number, or null where the quantity is undefined for this run (a resumed run's
step-0 probe): recorded, not missing. `low`/`high` are the metric's own interval (e.g. a
bootstrap over held-out episodes), `n` and `p_value` where the study has them. `notes` are
facts that are no metric (the files a synthesis wrote, its budget): kept, never compared.
The full detailed records (probe_metrics.json, ...) stay the run's own files.

`read_results(run folder or result.json)` reads either form: a result.json written before
named metrics (a recipe's nested mapping) reads each number at its "/"-joined key path as
its name, a {value, low, high} estimate as one metric with its interval, lists and text
left out: the names and values are those `compare` read by path from the same file.
A name that is absent raises `MetricNotFound`, naming the ones the run has.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl_harness.harness.layout import RESULT_NAME

RESULT_FORMAT = "rl_harness.results/1"
_EXTRAS = ("low", "high", "n", "p_value")
_BOUNDS = ("low", "high")


class MetricNotFound(KeyError):
    """A metric name a result does not have (`name`); the message names the ones it has."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scalar(value: Any, what: str) -> float | None:
    """A metric's number as given (an int stays an int in result.json); None stays None."""
    if value is None or _number(value):
        return value  # type: ignore[no-any-return]  # checked just above
    raise TypeError(f"{what} must be a number or None, got {type(value).__name__} {value!r}")


@dataclass(frozen=True)
class Metric:
    """One named scalar: its value (None: undefined for this run) and, where the study has
    them, its interval (`low`, `high`), the number of units behind it and a p-value."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    p_value: float | None = None

    def __post_init__(self) -> None:
        for name in ("value", *_EXTRAS):
            _scalar(getattr(self, name), f"Metric.{name}")

    @classmethod
    def of(cls, estimate: Mapping[str, Any] | float | None) -> Metric:
        """A metric from a number, None, or an estimate record {"value", "low", "high", ...}
        (the probes' form; its other keys are left in the detailed record)."""
        if not isinstance(estimate, Mapping):
            return cls(_scalar(estimate, "a metric"))
        return cls(**{key: estimate.get(key) for key in ("value", *_EXTRAS)})

    def to_json(self) -> dict[str, float | None]:
        """{"value": ...} plus each of low, high, n, p_value the metric has."""
        out: dict[str, float | None] = {"value": self.value}
        out |= {key: getattr(self, key) for key in _EXTRAS if getattr(self, key) is not None}
        return out


@dataclass
class Results(Mapping[str, Metric]):
    """A run's result: metric name -> `Metric`, each added once (`add`), and `notes`
    (facts that are no metric). Read by name: `results["probe_r2"]` (a `Metric`),
    `results.value("probe_r2")`; an absent name raises `MetricNotFound`."""

    metrics: dict[str, Metric] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def add(
        self,
        name: str,
        value: Metric | Mapping[str, Any] | float | None,
        *,
        low: float | None = None,
        high: float | None = None,
        n: int | None = None,
        p_value: float | None = None,
    ) -> Metric:
        """Record the metric `name` (a `Metric`, an estimate record, a number or None);
        a name recorded twice is an error (each metric is declared where it is computed)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a metric name must be non-empty text, got {name!r}")
        if name in self.metrics:
            raise ValueError(f"metric {name!r} recorded twice")
        metric = value if isinstance(value, Metric) else Metric.of(value)
        given = {"low": low, "high": high, "n": n, "p_value": p_value}
        extras = {key: given[key] for key in _EXTRAS if given[key] is not None}
        if extras:
            metric = Metric(**(metric.to_json() | extras))  # type: ignore[arg-type]
        self.metrics[name] = metric
        return metric

    def include(self, other: Results, prefix: str = "") -> None:
        """Add each metric of `other` (a part a helper declared) under `prefix` + its name;
        its notes too."""
        for name, metric in other.items():
            self.add(prefix + name, metric)
        self.notes |= {prefix + key: note for key, note in other.notes.items()}

    def __getitem__(self, name: str) -> Metric:
        try:
            return self.metrics[name]
        except KeyError:
            raise MetricNotFound(name, self._absent(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self.metrics

    def __iter__(self) -> Iterator[str]:
        return iter(self.metrics)

    def __len__(self) -> int:
        return len(self.metrics)

    def value(self, name: str) -> float | None:
        """The value of the metric `name` (None where it is undefined for this run)."""
        return self[name].value

    def optional(self, name: str) -> float | None:
        """The value of the metric `name`, None where the result has no such metric (runs
        recorded before it existed) or it is undefined."""
        metric = self.metrics.get(name)
        return None if metric is None else metric.value

    def _absent(self, name: str, shown: int = 30) -> str:
        close = difflib.get_close_matches(name, list(self.metrics), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        have = ", ".join(list(self.metrics)[:shown]) if self.metrics else "none"
        if len(self.metrics) > shown:
            have += f", ... ({len(self.metrics)} in all)"
        return f"no metric {name!r}{hint} (the result has: {have})"

    def to_json(self) -> dict[str, Any]:
        """result.json's form (module docstring)."""
        out: dict[str, Any] = {
            "format": RESULT_FORMAT,
            "metrics": {name: metric.to_json() for name, metric in self.metrics.items()},
        }
        return out | ({"notes": dict(self.notes)} if self.notes else {})

    @classmethod
    def from_json(cls, document: Any) -> Results:
        """A result.json document: the named form, or an older nested mapping read by key
        path (`legacy_metrics`); anything else has no metrics."""
        if is_named(document):
            metrics = {name: Metric.of(entry) for name, entry in document["metrics"].items()}
            return cls(metrics, dict(document.get("notes") or {}))
        return cls(legacy_metrics(document) if isinstance(document, Mapping) else {})


def is_named(document: Any) -> bool:
    """Whether a result.json document has the named form (`Results.to_json`)."""
    return isinstance(document, Mapping) and document.get("format") == RESULT_FORMAT


def legacy_metrics(document: Mapping[str, Any], prefix: str = "") -> dict[str, Metric]:
    """The metrics of a result.json written before named metrics: each number (or null) at
    its "/"-joined key path; a mapping with a "value" is one estimate (its low/high kept);
    lists, text and booleans are no metric. A non-finite number reads as None, as `compare`
    always read it."""
    metrics: dict[str, Metric] = {}
    for key, node in document.items():
        name = f"{prefix}{key}"
        if isinstance(node, Mapping):
            if "value" in node and (node["value"] is None or _number(node["value"])):
                bounds = {
                    k: _finite(node.get(k)) if _number(node.get(k)) else None for k in _BOUNDS
                }
                metrics[name] = Metric(_finite(node["value"]), **bounds)
            else:
                metrics |= legacy_metrics(node, name + "/")
        elif node is None or _number(node):
            metrics[name] = Metric(_finite(node))
    return metrics


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def read_results(path: Path | str) -> Results:
    """The `Results` of a run folder (its result.json) or of a result.json file, either
    form; a missing file is a FileNotFoundError naming it."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_NAME
    return Results.from_json(json.loads(path.read_text(encoding="utf-8")))
