"""Compare many completed runs: one row per experiment leaf (arm), intervals across runs.

    comparison = compare_runs([study_dir], metrics=None)       # library use (a synthesis leaf)
    write_comparison(comparison, out_dir)                        # comparison.md/.json/.png
    rl-harness compare PATH... [--metric KEY]... [--metrics all|KEY,KEY] [--group-by KEY]...
                       [--where KEY=VALUE]... [--library-commit COMMIT] [--json] [--out DIR]
                       [--allow-mixed] [--allow-mixed-budgets]

Every completed run (run_manifest.json status "completed") at or under the paths counts; a
Tune run counts once per trial (its seed), with that trial's final metrics. A run's arm is its
experiment leaf (the manifest's experiment folder relative to its repo).

Metric keys, looked up in this order for each run:
- "return_per_step": the final env_runners/episode_return_mean / episode_len_mean;
- a key of the final metrics.jsonl row (e.g. "env_runners/episode_return_mean");
- "<file>.json:<path>": a value in a JSON record of the run (e.g.
  "probe_metrics.json:probe/within_branch/r2_pooled"); a {value, low, high} estimate gives
  its value; "[i]" after a part indexes a JSON list, negative from the end (e.g.
  "closed_loop_probes.json:probes[-1]/r2_pooled", the last checkpoint's probe);
- "<name>": a metric of result.json by its name (`rl_harness.Results`; an older nested
  result.json names each number by its "/"-joined key path, so "return_per_step/greedy"
  reads both), then, as before named metrics, the same path in probe_metrics.json.
An unknown metric is an error naming the metrics the runs' result.json files hold.
Defaults: the result keys the runs' recipes declare as their headline (`RECIPE`'s
`headline`, read from the recipe source with `ast`, never imported: recipe.static_headline);
without one, return_per_step and the first pooled R²s
of probe_metrics.json ("r2_pooled" at any depth), DEFAULT_COUNT in all, a note naming how
many were left out. "all": `every_metric`. Across runs: mean and a 95% Student-t interval
(none for a single run); runs without the metric are counted per metric.

Config keys (dotted keys of config.json, e.g. "lr", "env_config.episode_length",
"module.model_config.hidden_size"; a Tune trial's own config): `group_by` splits each arm by
the values of the keys ("study/a [lr=0.001]"), `where` keeps only the runs whose config has
the given values (`--where lr=0.001`: compared as JSON values, else as text).

Runs that are not completed are left out (a note counts them by status: failed, interrupted,
crashed, still running). Run folders that cannot be read (a corrupt manifest, a
results/<run-id>/ without one, a summary.json that cannot be read) are named in `unreadable`
and a note, never skipped silently; files read in part (a truncated metrics.jsonl row, a
corrupt config.json or probe_metrics.json read as absent) are named in `warnings`.
`library_commit` (or `where={"library.commit": ...}`, read from the manifest) keeps the runs
of one library commit (a prefix).
Runs from different library commits are refused (their numbers may not be comparable) unless
`allow_mixed`; runs of different budgets (the manifest's `options.budget`; smoke with
non-smoke; a run recorded before budgets had names reads "unrecorded") are refused unless
`allow_mixed_budgets`, which pools them with a note; `group_by=["budget.name"]` splits them
instead (one budget per row, no refusal). Each error names the runs of each commit or
budget. A `group_by` or `where` key that no run's config.json has is an error (a typo would
otherwise pool or drop everything).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rl_harness.harness.configrecord import config_lookup, flat_config
from rl_harness.harness.console import text_table
from rl_harness.harness.layout import RESULT_NAME
from rl_harness.harness.metric_keys import LENGTH_KEY, RETURN_KEY
from rl_harness.harness.metrics import flatten, is_timing_key
from rl_harness.harness.recipe import static_headline
from rl_harness.harness.results import Results, is_named
from rl_harness.harness.runtools.records import RunRecord, RunToolError, Unreadable, find_runs

RETURN_PER_STEP = "return_per_step"
PROBE_FILE = "probe_metrics.json"
CONFIDENCE = 0.95
UNRECORDED_BUDGET = "unrecorded"  # a non-smoke run recorded before budgets had names
BUDGET_KEY = "budget.name"  # config.json's record of the budget (runners/common.py)
LIBRARY_COMMIT_KEY = "library.commit"  # a `where` key read from the manifest, not config.json
ALL_METRICS = "all"  # compare_runs(metrics="all"): every metric (`every_metric`)
DEFAULT_COUNT = 6  # metrics shown when the recipes declare no headline
WIDE = 6  # more metrics than this: the text table lists one metric per row
MAX_PANELS = 12  # panels in comparison.png (3 columns x 4 rows at most)


class ComparisonError(ValueError):
    """Runs that cannot be compared (none found, mixed library commits, unknown metric)."""


@dataclass(frozen=True)
class RunEntry:
    """One run (or one trial of a Tune run) with the values of the compared metrics."""

    arm: str
    run_id: str
    seed: int | None
    library_commit: str | None
    values: dict[str, float | None]
    path: str
    config: dict[str, Any] = field(default_factory=dict)  # the group_by keys' config values
    budget: str = UNRECORDED_BUDGET  # the recipe budget it ran (RunRecord.budget)


@dataclass(frozen=True)
class MetricSummary:
    n: int  # runs with a value
    mean: float | None
    low: float | None  # 95% Student-t interval of the mean across runs
    high: float | None
    values: list[float]


@dataclass(frozen=True)
class ArmSummary:
    arm: str
    n_runs: int
    seeds: list[int | None]
    metrics: dict[str, MetricSummary]


@dataclass(frozen=True)
class Comparison:
    metrics: list[str]
    arms: list[ArmSummary]
    runs: list[RunEntry]
    library_commits: list[str | None]
    confidence: float = CONFIDENCE
    notes: list[str] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)  # the budgets of the compared runs
    unreadable: list[str] = field(default_factory=list)  # "cannot read run folder X: why"
    # Files of compared runs read in part or not at all (a truncated metrics.jsonl row, a
    # corrupt probe_metrics.json), each naming the file and what was skipped.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _arm(record: RunRecord) -> str:
    experiment = record.section("experiment")
    for key in ("relative_dir", "module"):
        if experiment.get(key):
            return str(experiment[key])
    return record.path.parent.parent.name  # <leaf>/results/<run-id>


def _number(value: Any) -> float | None:
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


_INDEX = re.compile(r"\[(-?\d+)\]")


def _lookup(document: Any, path: str) -> tuple[bool, float | None]:
    """(found, number) for a "/"-separated path in a JSON document; a part may end in list
    indices, "probes[-1]" (the last element of the list "probes"; negative from the end)."""
    node = document
    for part in path.split("/"):
        key = _INDEX.split(part)[0]
        if key:
            if not isinstance(node, Mapping) or key not in node:
                return False, None
            node = node[key]
        for index in _INDEX.findall(part):
            position = int(index)
            if not isinstance(node, list) or not -len(node) <= position < len(node):
                return False, None
            node = node[position]
    return True, _number(node)


class _RunReader:
    """The records of one run, read once (a record that cannot be read reads as absent; a
    lenient `RunRecord` notes it in its `problems`)."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self._json: dict[str, Any] = {}
        self._results: Results | None = None

    def json(self, name: str) -> Any:
        if name not in self._json:
            try:
                self._json[name] = self.record.optional_json(name)
            except RunToolError:  # a strict record: absent, as before
                self._json[name] = None
        return self._json[name]

    def results(self) -> Results:
        """result.json's named metrics (an older nested result.json read by key path)."""
        if self._results is None:
            self._results = Results.from_json(self.json(RESULT_NAME))
        return self._results

    def value(self, key: str, final: Mapping[str, Any]) -> tuple[bool, float | None]:
        if key == RETURN_PER_STEP:
            ret, length = _number(final.get(RETURN_KEY)), _number(final.get(LENGTH_KEY))
            if ret is None or not length:
                return False, None
            return True, ret / length
        if key in final:
            return True, _number(final[key])
        name, sep, path = key.partition(":")
        if sep and name.endswith(".json"):
            return _lookup(self.json(name), path)
        results = self.results()
        if key in results:
            return True, _number(results[key].value)
        # An older result.json's non-numbers and list items ("over_training[-1]/r2") are
        # still found by path, as before named metrics; then probe_metrics.json by path.
        for name in ((RESULT_NAME,) if not is_named(self.json(RESULT_NAME)) else ()) + (
            PROBE_FILE,
        ):
            found, number = _lookup(self.json(name), key)
            if found:
                return found, number
        return False, None


def pooled_r2_metrics(records: Sequence[RunRecord]) -> list[str]:
    """return_per_step plus every pooled R² found in the runs' probe_metrics.json."""
    keys: list[str] = [RETURN_PER_STEP]
    for record in records:
        reader = _RunReader(record)
        probe = reader.json(PROBE_FILE)
        if not isinstance(probe, Mapping):
            continue
        for flat_key in flatten(probe):
            if flat_key.endswith("/value") and flat_key.split("/")[-2] == "r2_pooled":
                key = f"{PROBE_FILE}:{flat_key.removesuffix('/value')}"
                if key not in keys:
                    keys.append(key)
            elif flat_key.split("/")[-1] == "r2_pooled" and f"{PROBE_FILE}:{flat_key}" not in keys:
                keys.append(f"{PROBE_FILE}:{flat_key}")  # a pooled R² that was undefined
    return keys


def recipe_headline(record: RunRecord) -> tuple[str, ...]:
    """The result keys the run's recipe declares as its headline (README: the closing
    line's numbers): read from the recorded source file, else from the file of that name in
    the leaf beside results/ (a run copied with its repo); () when neither declares one.
    It only chooses which numbers to show: the values always come from the run's records."""
    recorded = record.section("experiment").get("source_file")
    if not recorded:
        return ()
    for source in (Path(recorded), record.path.parent.parent / Path(recorded).name):
        if source.is_file():
            return static_headline(source)
    return ()


def default_metrics(records: Sequence[RunRecord]) -> tuple[list[str], str | None]:
    """The handful of metrics `compare` shows unless told: the headline keys the runs'
    recipes declare (in order, each once), else return_per_step and the first pooled R²s of
    probe_metrics.json (DEFAULT_COUNT in all). Returns the keys and a note naming what was
    left out (None when nothing was)."""
    keys: list[str] = []
    for record in records:
        keys += [key for key in recipe_headline(record) if key not in keys]
    if keys:
        return keys, None
    found = pooled_r2_metrics(records)
    if len(found) <= DEFAULT_COUNT:
        return found, None
    note = (
        f"showing {DEFAULT_COUNT} of {len(found)} pooled metrics (the recipes declare no "
        "headline); --metrics all shows every metric, --metric KEY picks"
    )
    return found[:DEFAULT_COUNT], note


def _numeric_paths(node: Any, prefix: str = "") -> list[str]:
    """ "/"-joined paths of the numbers in a JSON document (a {value, low, high} estimate is
    one number); lists are left out (`--metric` reaches into them with [i])."""
    if isinstance(node, Mapping):
        if "value" in node and _number(node) is not None:
            return [prefix]
        paths: list[str] = []
        for key, value in node.items():
            if "/" in str(key) or "[" in str(key):  # a key a "/" path cannot name
                continue
            paths += _numeric_paths(value, f"{prefix}/{key}" if prefix else str(key))
        return paths
    return [prefix] if prefix and _number(node) is not None else []


def every_metric(records: Sequence[RunRecord]) -> list[str]:
    """`--metrics all`: the headline keys, return_per_step, every pooled R² of
    probe_metrics.json, every number of result.json, then every non-timing key of the final
    metrics.jsonl row; each once, in that order."""
    keys = default_metrics(records)[0]
    for key in pooled_r2_metrics(records):
        keys += [key] if key not in keys else []
    for record in records:
        reader = _RunReader(record)
        if is_named(reader.json(RESULT_NAME)):
            names = [n for n, m in reader.results().items() if _number(m.value) is not None]
        else:  # an older nested result.json: its numbers' paths, as always
            names = _numeric_paths(reader.json(RESULT_NAME))
        keys += [k for k in names if k not in keys]
    for record in records:
        final = record.final_metrics
        keys += [k for k in final if not is_timing_key(k) and k not in keys]
    return keys


def _matches(value: Any, wanted: Any) -> bool:
    """A config value against a wanted one: equal as JSON values, else as text."""
    if not isinstance(wanted, str):
        return bool(value == wanted)
    try:
        parsed = json.loads(wanted)
    except json.JSONDecodeError:
        parsed = wanted
    return value == parsed or str(value) == wanted


def _label(value: Any) -> str:
    return "-" if value is None else json.dumps(value) if not isinstance(value, str) else value


def _entries(
    record: RunRecord,
    metrics: Sequence[str],
    group_by: Sequence[str] = (),
    where: Mapping[str, Any] | None = None,
) -> tuple[list[RunEntry], set[str], int]:
    """One entry per run, or per trial of a Tune run; the metrics it knows; how many units
    `where` left out."""
    reader = _RunReader(record)
    budget = budget_label(record)
    arm, commit = _arm(record), record.section("library").get("commit")
    summary = record.summary or {}
    units: list[tuple[str, int | None, Mapping[str, Any], Any]] = []
    if summary.get("runner") == "tune" and summary.get("trials"):
        for trial in summary["trials"]:
            final = trial.get("final_metrics") or {}
            trial_config = trial.get("config") or record.config
            unit = f"{record.run_id}/{trial.get('trial_id')}"
            units.append((unit, trial.get("seed"), final, trial_config))
    else:
        seed = (record.manifest or {}).get("seed")
        units.append((record.run_id, seed, record.final_metrics, None))
    entries: list[RunEntry] = []
    known: set[str] = set()
    dropped = 0
    for run_id, seed, final, unit_config in units:
        config = unit_config if unit_config is not None else record.config
        if where and not all(
            found and _matches(value, wanted)
            for found, value, wanted in (
                (*config_lookup(config, key), wanted) for key, wanted in where.items()
            )
        ):
            dropped += 1
            continue
        grouped = {key: config_lookup(config, key)[1] for key in group_by}
        label = arm
        if grouped:
            label += " [" + ", ".join(f"{k}={_label(v)}" for k, v in grouped.items()) + "]"
        values: dict[str, float | None] = {}
        for key in metrics:
            found, number = reader.value(key, final)
            known.update([key] if found else [])
            values[key] = number
        entries.append(
            RunEntry(label, run_id, seed, commit, values, str(record.path), grouped, budget)
        )
    return entries, known, dropped


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MetricSummary:
    """Mean and the Student-t interval of the mean across runs (no interval for one run)."""
    n = len(values)
    if n == 0:
        return MetricSummary(0, None, None, None, [])
    mean = math.fsum(values) / n
    if n == 1:
        return MetricSummary(1, mean, None, None, list(values))
    from scipy import stats

    scale = float(stats.sem(values))  # sample sd (ddof 1) / sqrt(n)
    if scale == 0.0:  # equal values: SciPy answers nan for a zero scale; the interval is a point
        return MetricSummary(n, mean, mean, mean, list(values))
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=scale)
    return MetricSummary(n, mean, float(low), float(high), list(values))


def budget_label(record: RunRecord) -> str:
    """The budget a run is pooled under: its recorded name, "smoke", or "unrecorded"."""
    return record.budget or UNRECORDED_BUDGET


def _listing(groups: Mapping[Any, Sequence[str]], width: int = 0) -> str:
    return "; ".join(
        f"{(str(key) if key is not None else 'no commit')[: width or None]}: {', '.join(ids)}"
        for key, ids in groups.items()
    )


def check_same_budget(runs: Sequence[tuple[str, str]], *, allow_mixed_budgets: bool = False) -> str:
    """The one budget of `runs` ((budget, run id) pairs); ComparisonError naming the runs of
    each budget when they differ (smoke with non-smoke included), unless
    `allow_mixed_budgets` (then a note)."""
    by_budget: dict[str, list[str]] = {}
    for budget, run_id in runs:
        by_budget.setdefault(budget, [])
        if run_id not in by_budget[budget]:
            by_budget[budget].append(run_id)
    if len(by_budget) <= 1:
        return next(iter(by_budget), UNRECORDED_BUDGET)
    listing = _listing(by_budget)
    if not allow_mixed_budgets:
        raise ComparisonError(
            f"runs of {len(by_budget)} budgets would be pooled ({listing}); compare one budget, "
            "or pass --allow-mixed-budgets (allow_mixed_budgets=True) to pool them anyway"
        )
    return f"mixed budgets pooled: {listing}"


def _config_keys(records: Sequence[RunRecord]) -> set[str]:
    """Every dotted config.json key of these runs (and of their Tune trials' configs)."""
    keys: set[str] = set()
    for record in records:
        configs = [
            record.config,
            *(t.get("config") for t in (record.summary or {}).get("trials") or []),
        ]
        for config in configs:
            if isinstance(config, Mapping):
                flat = flat_config(config)
                keys.update(flat)
                for key in flat:  # a mapping's own key counts too: `env_config`
                    parts = key.split(".")
                    keys.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return keys


def _check_config_keys(records: Sequence[RunRecord], keys: Sequence[str], flag: str) -> None:
    """ComparisonError for a --group-by / --where key that no run's config.json has."""
    if not keys:
        return
    known = _config_keys(records)
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ComparisonError(f"{flag} {key}: no run's config.json has this key{hint}")


def _status_counts(records: Sequence[RunRecord]) -> str:
    counts: dict[str, int] = {}
    for record in records:
        status = str(record.status)  # "None" without a manifest
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def chain_ends(records: Sequence[RunRecord]) -> tuple[list[RunRecord], list[str]]:
    """The records less those a `--resume-from` run among them continued (its manifest's
    `parent`): a chain counts once, by its last run (its final metrics are the chain's),
    and the run ids left out for it."""
    continued = {
        str(link.get("run_id"))
        for record in records
        if isinstance(link := (record.manifest or {}).get("parent"), Mapping)
    }
    kept = [r for r in records if r.run_id not in continued]
    return kept, sorted(r.run_id for r in records if r.run_id in continued)


def compare_runs(
    paths: Sequence[Path | str],
    metrics: Sequence[str] | str | None = None,
    *,
    allow_mixed: bool = False,
    allow_mixed_budgets: bool = False,
    group_by: Sequence[str] = (),
    where: Mapping[str, Any] | None = None,
    library_commit: str | None = None,
) -> Comparison:
    """Compare the completed runs at or under `paths` (run folders or study folders).

    `metrics`: keys (see the module docstring); None: the handful `default_metrics` picks;
    "all": `every_metric`. `group_by`: config.json keys that split each arm by their values;
    `where`: config.json key -> value a run must have to count (see the module docstring);
    `library_commit` (or `where={"library.commit": ...}`): only runs of the library commit
    starting with it (the manifest's `library.commit`). Runs of different library commits or
    budgets are refused unless `allow_mixed` / `allow_mixed_budgets`."""
    where = dict(where or {})
    if LIBRARY_COMMIT_KEY in where:
        picked = str(where.pop(LIBRARY_COMMIT_KEY))
        if library_commit is not None and picked != library_commit:
            raise ComparisonError(
                f"library commit given twice: {library_commit} and {LIBRARY_COMMIT_KEY}={picked}"
            )
        library_commit = picked
    records: dict[Path, RunRecord] = {}
    unreadable: dict[Path, Unreadable] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise ComparisonError(f"no such folder: {path}")
        scan = find_runs(path, lenient=True)
        unreadable.update((u.path, u) for u in scan.unreadable)
        for record in scan.records:
            records.setdefault(record.path, record)
    for record in list(records.values()):
        # Read now, so each unreadable file is named. Without its summary a run cannot be
        # told from a Tune run (one unit per trial): it is left out, named.
        _ = record.summary, record.config, record.metrics_rows
        if record.summary is None and record.paths.summary.is_file():
            del records[record.path]
            problem = next(p for p in record.problems if str(record.paths.summary) in p)
            why = problem.replace(f"{record.path}{os.sep}", "").removesuffix("; read without it")
            unreadable[record.path] = Unreadable(record.path, f"{why}: its runner is unknown")
    cannot_read = [str(u) for u in unreadable.values()]
    completed, continued = chain_ends([r for r in records.values() if r.status == "completed"])
    others = [r for r in records.values() if r.status != "completed"]
    if not completed:
        found = f"{len(records)} runs found: {_status_counts(others)}" if others else "none found"
        if cannot_read:
            found += f"; {len(cannot_read)} run folder(s) could not be read: " + "; ".join(
                cannot_read
            )
        raise ComparisonError(f"no completed runs under {', '.join(map(str, paths))} ({found})")
    notes = [f"left out: {line}" for line in cannot_read]
    if library_commit is not None:
        completed, note = _of_library_commit(completed, library_commit)
        notes.append(note)
    by_commit: dict[str | None, list[str]] = {}
    for record in completed:
        by_commit.setdefault(record.section("library").get("commit"), []).append(record.run_id)
    if continued:
        notes.append(f"counted as one run with their continuation: {', '.join(continued)}")
    _check_config_keys(completed, group_by, "--group-by")
    _check_config_keys(completed, list(where), "--where")
    if len(by_commit) > 1:
        listing = _listing(by_commit, 12)
        if not allow_mixed:
            raise ComparisonError(
                f"runs come from {len(by_commit)} library commits ({listing}); pick one with "
                "--library-commit COMMIT (library_commit=), or pass --allow-mixed "
                "(allow_mixed=True) to compare them anyway"
            )
        notes.append(f"mixed library commits: {listing}")
    if others:
        notes.append(f"left out {len(others)} runs not completed: {_status_counts(others)}")
    if metrics == ALL_METRICS:
        keys = every_metric(completed)
    elif metrics:
        keys = [metrics] if isinstance(metrics, str) else list(metrics)
    else:
        keys, shown = default_metrics(completed)
        notes += [shown] if shown else []
    entries: list[RunEntry] = []
    known: set[str] = set()
    dropped = 0
    for record in completed:
        record_entries, names, left_out = _entries(record, keys, group_by, where)
        entries.extend(record_entries)
        known |= names
        dropped += left_out
    if where:
        condition = ", ".join(f"{key}={value}" for key, value in where.items())
        if not entries:
            raise ComparisonError(f"no completed run has the config {condition}")
        notes.append(f"only runs with config {condition} ({dropped} left out)")
    # The runs `where` kept (so `--where budget.name=cpu` picks one budget); grouped by the
    # budget config.json records, each row holds one budget and nothing pools.
    split = BUDGET_KEY in group_by
    budget_note = check_same_budget(
        [(e.budget, e.run_id.split("/")[0]) for e in entries],
        allow_mixed_budgets=allow_mixed_budgets or split,
    )
    if budget_note.startswith("mixed") and not split:
        notes.append(budget_note)
    unknown = [key for key in keys if key not in known]
    if metrics == ALL_METRICS:
        keys = [key for key in keys if key in known]
    elif metrics and unknown:
        raise ComparisonError(
            f"no run has the metric(s) {', '.join(unknown)}" + _known_names(completed, unknown)
        )
    arms = []
    for arm in sorted({e.arm for e in entries}):
        members = [e for e in entries if e.arm == arm]
        summaries = {
            key: mean_interval([v for e in members if (v := e.values[key]) is not None])
            for key in keys
        }
        arms.append(ArmSummary(arm, len(members), [e.seed for e in members], summaries))
    warnings = [problem for record in completed for problem in record.problems]
    notes += [f"read in part: {line}" for line in warnings]
    return Comparison(
        keys,
        arms,
        entries,
        sorted(by_commit, key=str),
        notes=notes,
        budgets=sorted({e.budget for e in entries}),
        unreadable=cannot_read,
        warnings=warnings,
    )


def _known_names(records: Sequence[RunRecord], unknown: Sequence[str], shown: int = 20) -> str:
    """The metric names the runs' result.json hold, the closest to each unknown one first:
    what an unknown `--metric` could have meant."""
    names: list[str] = []
    for record in records:
        names += [name for name in _RunReader(record).results() if name not in names]
    if not names:
        return "; their result.json files hold no named metrics"
    close = [m for key in unknown for m in difflib.get_close_matches(key, names, n=3, cutoff=0.6)]
    listed = list(dict.fromkeys(close + names))[:shown]
    more = f", ... ({len(names)} in all; --metrics all lists them)" if len(names) > shown else ""
    hint = f"; did you mean {', '.join(dict.fromkeys(close))}?" if close else ""
    return f"{hint}; the runs' result.json metrics: {', '.join(listed)}{more}"


def _of_library_commit(records: Sequence[RunRecord], commit: str) -> tuple[list[RunRecord], str]:
    """The runs whose library commit starts with `commit` (a short commit as `runs` shows
    it), and a note saying how many were left out; ComparisonError naming the commits the
    runs have when none matches."""
    wanted = commit.strip().lower()
    if not wanted:
        raise ComparisonError("--library-commit needs a commit (a prefix of one)")
    chosen = [
        r for r in records if str(r.section("library").get("commit") or "").startswith(wanted)
    ]
    if not chosen:
        counts: dict[str, int] = {}
        for record in records:
            key = str(record.section("library").get("commit") or "none")[:12]
            counts[key] = counts.get(key, 0) + 1
        have = ", ".join(f"{key} ({n} runs)" for key, n in sorted(counts.items()))
        raise ComparisonError(f"no completed run has library commit {commit}; they have: {have}")
    left = len(records) - len(chosen)
    return chosen, f"only runs of library commit {commit} ({left} left out)"


def _cell(summary: MetricSummary, n_runs: int) -> str:
    if summary.mean is None:
        return "-"
    text = f"{summary.mean:.4g}"
    if summary.low is not None:
        text += f" [{summary.low:.4g}, {summary.high:.4g}]"
    if summary.n != n_runs:
        text += f" (n={summary.n})"
    return text


def comparison_rows(comparison: Comparison) -> list[list[str]]:
    header = ["arm", "runs", *comparison.metrics]
    rows = [header]
    for arm in comparison.arms:
        cells = [_cell(arm.metrics[key], arm.n_runs) for key in comparison.metrics]
        rows.append([arm.arm, str(arm.n_runs), *cells])
    return rows


def short_arm_labels(arms: Sequence[str]) -> list[str]:
    """Each arm by the fewest trailing path parts that still tell it from the others
    ("examples/.../study/reward_only [lr=0.1]" -> "reward_only [lr=0.1]")."""
    parts = [arm.split("/") for arm in arms]
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return list(arms)


def comparison_text(comparison: Comparison) -> str:
    """An aligned plain-text table: mean [95% interval] across runs, per arm and metric; with
    more than WIDE metrics, one metric per row and one arm per column (keys stay readable)."""
    header, *rows = comparison_rows(comparison)
    if len(comparison.metrics) > WIDE:
        labels = short_arm_labels([arm.arm for arm in comparison.arms])
        runs = [f"{label} ({row[1]} runs)" for label, row in zip(labels, rows, strict=True)]
        header = ["metric", *runs]
        rows = [[key, *(row[2 + i] for row in rows)] for i, key in enumerate(comparison.metrics)]
    table = text_table(header, rows, rule=True)
    footer = (
        f"mean [{comparison.confidence:.0%} t-interval across runs]; (n=k): runs with the metric; "
        f"budget: {', '.join(comparison.budgets) or '-'}"
    )
    return "\n".join([table, "", footer, *comparison.notes])


def comparison_markdown(comparison: Comparison) -> str:
    rows = comparison_rows(comparison)
    escape = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    lines = ["| " + " | ".join(escape[0]) + " |", "|" + "---|" * len(escape[0])]
    lines += ["| " + " | ".join(row) + " |" for row in escape[1:]]
    footer = (
        f"\nMean and {comparison.confidence:.0%} Student-t interval across runs (seeds); "
        f"{len(comparison.runs)} runs, budget: {', '.join(comparison.budgets) or '-'}, "
        "library commits: " + ", ".join((c or "none")[:12] for c in comparison.library_commits)
    )
    return "\n".join([*lines, footer, *comparison.notes]) + "\n"


def comparison_figure(comparison: Comparison) -> Any:
    """The comparison as a matplotlib `Figure` (not pyplot's: no backend switch): one panel
    per metric (the first MAX_PANELS) in a grid of at most 3 columns, arms on the x axis,
    each run a dot, each arm's mean with its interval; labelled axes, a title per panel, one
    legend and a title for the figure. Its size is bounded (at most about 15 x 15 inches)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    keys = comparison.metrics[:MAX_PANELS]
    columns = 2 if len(keys) in (2, 4) else min(3, max(1, len(keys)))
    rows = -(-max(1, len(keys)) // columns)
    labels = short_arm_labels([arm.arm for arm in comparison.arms])
    ticks = [textwrap.fill(label, 16) for label in labels]
    width = min(5.0, max(3.4, 0.8 * len(comparison.arms) + 1.8))
    fig = Figure(figsize=(width * columns, 3.6 * rows + 1.0), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for panel, ax in enumerate(axes.flat):
        if panel >= len(keys):
            ax.set_axis_off()
            continue
        key = keys[panel]
        for index, arm in enumerate(comparison.arms):
            summary = arm.metrics[key]
            if summary.values:
                jitter = [0.08 * (i - (summary.n - 1) / 2) for i in range(summary.n)]
                ax.scatter([index + j for j in jitter], summary.values, s=18, color="C0", zorder=3)
            if summary.mean is not None:
                low = summary.low if summary.low is not None else summary.mean
                high = summary.high if summary.high is not None else summary.mean
                ax.errorbar(
                    index + 0.3,
                    summary.mean,
                    yerr=[[summary.mean - low], [high - summary.mean]],
                    fmt="s",
                    color="C3",
                    capsize=4,
                )
        ax.set_xticks(range(len(comparison.arms)))
        ax.set_xticklabels(ticks, rotation=20, ha="right", fontsize="small")
        ax.set_xlim(-0.5, len(comparison.arms) - 0.2)
        ax.set_xlabel("arm (experiment leaf)", fontsize="small")
        ax.set_ylabel(textwrap.fill(key.rsplit(":", 1)[-1], 30), fontsize="small")
        ax.set_title(textwrap.fill(key, 44), fontsize="small")
        ax.grid(alpha=0.3, axis="y")
    handles = [
        Line2D([], [], ls="", marker="o", color="C0", label="one run (seed)"),
        Line2D([], [], ls="-", marker="s", color="C3", label="mean, 95% t-interval"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize="small")
    commits = ", ".join((c or "none")[:8] for c in comparison.library_commits)
    title = (
        f"{len(comparison.runs)} runs; budget {', '.join(comparison.budgets) or '-'}; "
        f"library {commits}"
    )
    if len(comparison.metrics) > len(keys):
        title += f"\nfirst {len(keys)} of {len(comparison.metrics)} metrics (all in comparison.md)"
    fig.suptitle(title, fontsize="medium")
    return fig


def plot_comparison(comparison: Comparison, path: Path) -> Path:
    """`comparison_figure` saved as PNG at `path`."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"plots are saved as PNG; got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    comparison_figure(comparison).savefig(path, dpi=100)
    return path


def write_comparison(comparison: Comparison, out_dir: Path) -> list[Path]:
    """comparison.md, comparison.json and comparison.png in `out_dir`."""
    from rl_harness.harness.atomic import write_json_atomic

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / "comparison.md"
    markdown.write_text(comparison_markdown(comparison), encoding="utf-8")
    record = out_dir / "comparison.json"
    write_json_atomic(record, comparison.to_dict())
    return [markdown, record, plot_comparison(comparison, out_dir / "comparison.png")]
