"""Named results (issue 48 item 4): a recipe declares each headline number once, by name,
with its interval; the harness writes result.json in that flat form; `show`, the closing line
and `compare` read it by name, and an absent name is an error naming the ones there are. An
older nested result.json reads by key path under the same names."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rl_harness import Metric, MetricNotFound, Results, read_results
from rl_harness.analysis.comparison import ComparisonError, compare_runs
from rl_harness.cli import main
from rl_harness.harness.console import result_summary
from rl_harness.harness.results import RESULT_FORMAT, is_named, legacy_metrics

LEAF = """
from dataclasses import dataclass

from rl_harness import Recipe, Results


@dataclass(frozen=True)
class Budget:
    score: float = 0.5


def run(context):
    results = Results(notes={"file": "probe.json"})
    results.add("score", context.settings.score + context.seed, low=0.0, high=9.0)
    results.add("steps/total", 10 * context.seed)
    results.add("probe/undefined", None)
    return results


RECIPE = Recipe(
    run=run, budgets={"smoke": Budget()}, default="smoke", headline=("score", "steps")
)
"""


def _leaf(tmp_path: Path) -> Path:
    path = tmp_path / "named" / "experiment.py"
    path.parent.mkdir(parents=True)
    path.write_text(LEAF)
    return path


def test_a_recipe_returning_results_writes_flat_named_metrics(tmp_path, capsys):
    leaf = _leaf(tmp_path)
    for seed in (1, 2):
        assert main([str(leaf), "--seed", str(seed), "--run-id", f"s{seed}"]) == 0
    run = leaf.parent / "results" / "s1"
    assert json.loads((run / "result.json").read_text()) == {
        "format": RESULT_FORMAT,
        "metrics": {
            "score": {"value": 1.5, "low": 0.0, "high": 9.0},
            "steps/total": {"value": 10},
            "probe/undefined": {"value": None},
        },
        "notes": {"file": "probe.json"},
    }
    # The closing line: each headline name, a group ("steps") by the names under it.
    console = capsys.readouterr()
    assert "[s1] result: score 1.5 | steps/total 10" in console.out + console.err
    results = read_results(run)
    assert results["score"] == Metric(1.5, low=0.0, high=9.0)
    assert results.value("steps/total") == 10 and results.value("probe/undefined") is None
    assert results.notes == {"file": "probe.json"}
    # `show` lists each metric by name.
    assert main(["show", str(run)]) == 0
    shown = capsys.readouterr().out
    assert "result.json:" in shown and "score" in shown and "steps/total" in shown
    # `compare --metric NAME` reads the name across the two runs (seeds 1 and 2).
    comparison = compare_runs([leaf.parent / "results"], ["score", "steps/total"])
    (arm,) = comparison.arms
    assert arm.metrics["score"].values == [1.5, 2.5]
    assert arm.metrics["steps/total"].values == [10.0, 20.0]
    # An unknown name: the error names the metrics the runs have, the closest first.
    with pytest.raises(ComparisonError, match=r"did you mean score\?.*metrics: score, "):
        compare_runs([leaf.parent / "results"], ["scor"])
    assert main(["compare", str(leaf.parent / "results"), "--metric", "steps/totl"]) == 2
    error = capsys.readouterr().err
    assert "rl-harness: error: no run has the metric(s) steps/totl" in error
    assert "did you mean steps/total?" in error


def test_each_metric_is_named_once_and_read_by_name():
    results = Results()
    results.add("r2", {"value": 0.8, "low": 0.7, "high": 0.9})
    results.add("p", 0.01, n=12)
    with pytest.raises(ValueError, match="metric 'r2' recorded twice"):
        results.add("r2", 0.5)
    with pytest.raises(TypeError, match="must be a number or None, got str"):
        results.add("text", "0.5")  # type: ignore[arg-type]
    with pytest.raises(MetricNotFound) as missing:
        results["r2s"]
    assert str(missing.value) == "no metric 'r2s'; did you mean r2? (the result has: r2, p)"
    assert missing.value.name == "r2s" and isinstance(missing.value, KeyError)
    assert results.optional("r3") is None and "r3" not in results and "r2" in results
    part = Results()
    part.add("k1", Metric(0.1, low=0.0, high=0.2))
    results.include(part, prefix="windows/")
    assert list(results) == ["r2", "p", "windows/k1"]
    # The JSON round trip is exact.
    assert Results.from_json(json.loads(json.dumps(results.to_json()))) == results


def test_an_older_nested_result_reads_by_key_path():
    old = {
        "iterations": 62,
        "return_per_step": {"greedy": 0.31, "sampled": 0.30},
        "probe": {"value": 0.86, "low": 0.85, "high": 0.87},
        "undefined": None,
        "nan": math.nan,
        "file": "interventions.json",
        "flag": True,
        "over_training": [{"r2": 0.1}],
    }
    assert not is_named(old)
    results = Results.from_json(old)
    assert list(results) == [
        "iterations",
        "return_per_step/greedy",
        "return_per_step/sampled",
        "probe",
        "undefined",
        "nan",
    ]
    assert results["probe"] == Metric(0.86, low=0.85, high=0.87)
    assert results.value("return_per_step/greedy") == 0.31
    assert results.value("nan") is None  # compare always read a non-finite number as none
    assert legacy_metrics({"a": {"b": {"value": None}}}) == {"a/b": Metric(None)}
    assert len(Results.from_json([1, 2])) == 0  # not a mapping: no metrics


def test_the_closing_line_of_named_metrics_without_a_headline():
    results = Results()
    for name in ("a", "b/c", "d", "e", "f", "g"):
        results.add(name, 1.0)
    assert (
        result_summary(results.to_json(), limit=3) == "a 1 | d 1 | e 1 | (+2 more in result.json)"
    )
    assert result_summary(results.to_json(), headline=("b", "x")) == "b/c 1 | x -"
