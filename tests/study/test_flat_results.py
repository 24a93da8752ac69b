"""The committed runs' result.json under named metrics (issue 48 item 4), bit for bit.

1. Every number `compare` read from a committed result.json by path (the old walker,
   comparison._lookup) is the value read by the same name through `read_results`.
2. Each study's `summary` now declares its metrics by name: run on a committed run's own
   probe_metrics.json it gives exactly the names and values of that run's committed
   result.json (and the intervals the record had), so a new run's result.json holds what an
   old one did, flat.
3. `compare_runs` gives the same values before and after a run's result.json is written in
   the named form.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from experiments.mess3_belief_geometry import analysis
from experiments.mess3_feedback import shared as feedback
from experiments.mess3_token_guess import shared as token_guess

from rl_harness import Results, read_results
from rl_harness.analysis.comparison import _lookup, _numeric_paths, compare_runs
from rl_harness.harness.results import is_named

EXPERIMENTS = Path(__file__).resolve().parents[2] / "examples" / "rl-experiments" / "experiments"
COMMITTED = sorted(EXPERIMENTS.glob("*/*/results/*/result.json"))
NAMED_SINCE = "20261207T1400"  # run ids from here on were written as named results


def _leaf(path: Path) -> str:
    return "/".join(path.relative_to(EXPERIMENTS).parts[:2])


def _null_paths(node, prefix=""):
    """The key paths of the nulls in a JSON document (compare found them, with no value)."""
    if isinstance(node, dict):
        if "value" in node:
            return [prefix] if node["value"] is None else []
        return [p for k, v in node.items() for p in _null_paths(v, f"{prefix}{k}/")]
    return [prefix.removesuffix("/")] if node is None else []


def test_there_are_committed_runs_of_every_study():
    studies = {_leaf(path).split("/")[0] for path in COMMITTED}
    assert studies >= {"mess3_belief_geometry", "mess3_token_guess", "mess3_feedback"}
    assert len(COMMITTED) >= 40


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{_leaf(p)}/{p.parent.name}")
def test_each_old_path_reads_the_same_number_by_name(path):
    raw = json.loads(path.read_text())
    # Committed records stay as written: runs made before named results landed nested, the
    # later ones (ids from NAMED_SINCE) named from the start, read as they are below.
    assert is_named(raw) == (path.parent.name >= NAMED_SINCE)
    results = read_results(path.parent)
    if is_named(raw):  # no old paths: every name reads its recorded value
        assert results and all(
            results.value(name) == raw["metrics"][name]["value"] for name in raw["metrics"]
        )
        return
    paths = _numeric_paths(raw)
    assert paths
    for key in paths:
        assert _lookup(raw, key) == (True, results.value(key)), key
    for key in _null_paths(raw):
        assert _lookup(raw, key) == (True, None) and results.value(key) is None, key


def _differences(old: Results, new: Results) -> list[str]:
    """Names whose value or recorded interval differ, or that one side lacks."""
    problems = [f"{n}: only in one" for n in set(old) ^ set(new)]
    for name in set(old) & set(new):
        a, b = old[name], new[name]
        if a.value != b.value or type(a.value) is not type(b.value):
            problems.append(f"{name}: {a.value!r} != {b.value!r}")
        elif a.low is not None and (a.low, a.high) != (b.low, b.high):
            problems.append(f"{name}: interval {a.low, a.high} != {b.low, b.high}")
    return sorted(problems)


def _runs(*leaves: str) -> list[Path]:
    return [p.parent for p in COMMITTED if _leaf(p) in leaves]


BELIEF_LEAVES = [
    f"mess3_belief_geometry/{leaf}"
    for leaf in (
        "reward_only",
        "next_token_aux",
        "belief_observation",
        "reward_only_memory",
        "next_token_aux_memory",
    )
]


@pytest.mark.parametrize("run", _runs(*BELIEF_LEAVES), ids=lambda p: p.name)
def test_belief_geometry_summary_declares_what_the_committed_result_holds(run):
    record = json.loads((run / "probe_metrics.json").read_text())
    old = read_results(run)
    new = analysis.summary(record["training_iterations"], record)
    assert _differences(old, new) == []
    # The probe estimates now keep their interval (the old result.json had values only).
    probe = record["probe"]["within_branch"]["r2_pooled"]
    assert new["probe_r2_within_branch"].low == probe["low"]


@pytest.mark.parametrize(
    "run",
    _runs(
        "mess3_token_guess/ppo",
        "mess3_token_guess/ppo_default_init",
        "mess3_token_guess/supervised",
    ),
    ids=lambda p: p.name,
)
def test_token_guess_summary_declares_what_the_committed_result_holds(run):
    record = json.loads((run / "probe_metrics.json").read_text())
    old = read_results(run)
    new = token_guess.summary(record["training_iterations"], record)
    assert _differences(old, new) == []


@pytest.mark.parametrize("run", _runs("mess3_feedback/ppo"), ids=lambda p: p.name)
def test_feedback_summary_declares_what_the_committed_result_holds(run):
    record = json.loads((run / "probe_metrics.json").read_text())
    old = read_results(run)
    new = feedback.summary(int(old.value("iterations")), record)
    assert _differences(old, new) == []


def _copy_run(run: Path, root: Path) -> Path:
    """The records compare reads, under the same leaf path."""
    copy = root / run.relative_to(EXPERIMENTS)
    copy.mkdir(parents=True)
    for name in ("run_manifest.json", "result.json", "summary.json", "config.json"):
        if (run / name).is_file():
            shutil.copy(run / name, copy / name)
    return copy


def test_compare_reads_the_same_values_before_and_after_the_named_form(tmp_path):
    leaves = ("mess3_belief_geometry/reward_only", "mess3_token_guess/supervised")
    for leaf in leaves:
        runs = _runs(leaf)
        before, after = tmp_path / "before", tmp_path / "after"
        for run in runs:
            _copy_run(run, before)
            named = _copy_run(run, after) / "result.json"
            named.write_text(json.dumps(read_results(run).to_json()))
        # The metrics every run holds (compare reads completed runs only; a later run's
        # analysis, or a retrain's, may hold more).
        names = sorted(set.intersection(*(set(read_results(run)) for run in runs)))
        kwargs = {"allow_mixed": True, "allow_mixed_budgets": True}
        old = compare_runs([before / leaf], names, **kwargs)
        new = compare_runs([after / leaf], names, **kwargs)
        assert [(e.run_id, e.values) for e in old.runs] == [(e.run_id, e.values) for e in new.runs]
        assert any(v is not None for e in new.runs for v in e.values.values())
        shutil.rmtree(before), shutil.rmtree(after)


@pytest.mark.parametrize(
    "run",
    _runs(*BELIEF_LEAVES, "mess3_token_guess/ppo", "mess3_token_guess/supervised"),
    ids=lambda p: p.name,
)
def test_summary_receives_the_iterations_run_algorithm_returned(run):
    """`summary(iterations, record)` is given probe_metrics.json's `training_iterations` (the
    last metrics.jsonl row's); the old `summary(RunResult)` read `RunResult.iterations`
    (`algo.iteration`, summary.json's `iterations`): on every committed run they are one
    number, and result.json recorded it."""
    record = json.loads((run / "probe_metrics.json").read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    returned = json.loads((run / "summary.json").read_text())["iterations"]
    given = record["training_iterations"]
    assert (
        given == rows[-1]["training_iteration"] == returned == read_results(run).value("iterations")
    )
