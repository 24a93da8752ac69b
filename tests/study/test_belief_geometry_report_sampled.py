"""The memory point read on the agent's sampled rollouts beside its greedy ones: the sampled
tables read `incremental_r2_sampled` (never the greedy record), the returns table tests both
policies' return against the best stack-3 table with Holm over every arm and policy, and
"not shown" names the rollouts each line rests on."""

from __future__ import annotations

import dataclasses
import json

import pytest
from experiments.mess3_belief_geometry import incremental, report
from scipy import stats

from rl_harness import Metric, Results
from rl_harness.analysis import holm_adjust
from tests.study.test_belief_geometry_report import memory_runs  # noqa: F401 (fixture)


def test_the_report_names_the_incremental_records_the_study_writes() -> None:
    # report.py reads records without importing torch, so it spells the keys itself.
    assert report.INCREMENTAL_KEY == incremental.KEY
    assert report.INCREMENTAL_SAMPLED_KEY == incremental.KEY_SAMPLED


def _with_sampled(run: report.StudyRun, seed: int, shift: float) -> report.StudyRun:
    """The run as seed `seed`, with a sampled record: its greedy headline with every b - a
    moved by `shift` (so the sampled tables must differ from the greedy ones) and a sampled
    return of 0.70 + 0.01 * seed."""
    metrics = {
        name: metric
        for name, metric in run.result.items()
        if not name.startswith(f"{incremental.KEY_SAMPLED}/") and name != "return_per_step/sampled"
    }
    for name, metric in run.result.items():  # the greedy headline, as the sampled one
        if name.startswith(f"{incremental.KEY}/"):
            sampled = incremental.KEY_SAMPLED + name.removeprefix(incremental.KEY)
            if name.endswith("/agent_increment"):
                metric = dataclasses.replace(metric, value=metric.value + shift * (1 + 0.1 * seed))
            metrics[sampled] = metric
    metrics["return_per_step/sampled"] = Metric(0.70 + 0.01 * seed)
    return dataclasses.replace(run, seed=seed, result=Results(metrics))


def test_sampled_tables_read_the_sampled_record(memory_runs) -> None:  # noqa: F811
    base = memory_runs[0]
    runs = [_with_sampled(base, seed, 0.5) for seed in (0, 1, 2)]
    per_run = report.memory_incremental_runs_table(runs, key=report.INCREMENTAL_SAMPLED_KEY)
    greedy_per_run = report.memory_incremental_runs_table(runs)
    assert "held-out sampled episodes" in per_run and "held-out greedy episodes" in greedy_per_run
    k1 = runs[1].result.value(f"{incremental.KEY_SAMPLED}/k1/agent_increment")
    assert f"| {base.arm} | 1 | 1 | global | " in per_run
    assert f"{k1:+.3f} [" in per_run and f"{k1:+.3f} [" not in greedy_per_run
    across = report.memory_incremental_seeds_table(runs, key=report.INCREMENTAL_SAMPLED_KEY)
    values = [r.result.value(f"{incremental.KEY_SAMPLED}/k1/agent_increment") for r in runs]
    p = float(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue)
    label = report.INCREMENT_QUANTITIES["agent_increment"]
    line = next(
        line
        for line in across.splitlines()
        if line.startswith(f"| {base.arm} | {label} | global | 1 | ")
    )
    assert f"{sum(values) / 3:+.3f} [" in line and f"| {report._p(p)} |" in line
    # No run with the sampled record: the table says so instead of printing an empty table.
    without = {k: v for k, v in base.result.items() if not k.startswith(incremental.KEY_SAMPLED)}
    empty = report.memory_incremental_seeds_table(
        [dataclasses.replace(base, result=Results(without))], key=report.INCREMENTAL_SAMPLED_KEY
    )
    assert "| no run has `incremental_r2_sampled` |" in empty


def test_returns_are_tested_under_both_policies_with_one_holm_family(memory_runs) -> None:  # noqa: F811
    base = memory_runs[0]
    runs = [_with_sampled(base, seed, 0.0) for seed in (0, 1, 2)]
    values = report.point_solver_values(runs)
    tests = report.stack3_gap_tests(runs, values)
    assert list(tests) == [(base.arm, "greedy"), (base.arm, "sampled")]
    sampled_gaps = [0.70 + 0.01 * s - values["stack_3"] for s in (0, 1, 2)]
    assert tests[(base.arm, "sampled")]["gaps"] == pytest.approx(sampled_gaps)
    ps = [t["p"] for t in tests.values()]
    assert ps[1] == pytest.approx(
        float(stats.ttest_1samp(sampled_gaps, 0.0, alternative="greater").pvalue)
    )
    assert [t["p_holm"] for t in tests.values()] == holm_adjust(ps)
    table = report.memory_returns_table(runs)
    assert "Holm over the 2 tests: each arm under each policy" in table
    assert f"| {base.arm} | sampled | " in table
    row = next(line for line in table.splitlines() if line.startswith(f"| {base.arm} | 2 |"))
    assert (
        f"| 0.7200 | {0.72 / values['belief_mdp']:.3f} | {0.72 - values['stack_3']:+.4f} |" in row
    )
    text = report.memory_not_shown(runs)
    assert f"- `{base.arm}`, sampled policy: a return above the best stack-3" in text
    assert f"- `{base.arm}`, global, sampled rollouts (3 seeds)" in text


def test_solver_values_agree_to_rounding_not_to_the_bit(memory_runs) -> None:  # noqa: F811
    """Each run solves its point again; two solves agree to float rounding (4e-16 between the
    memory point's committed runs), which is one point; a real difference is refused."""
    base = memory_runs[0]
    values = dict(base.solver_values or {})
    rounded = dataclasses.replace(
        base, run_id="rounded", solver_values=values | {"stack_3": values["stack_3"] + 4e-16}
    )
    assert report.point_solver_values([base, rounded])["stack_3"] == values["stack_3"]
    other = dataclasses.replace(
        base, run_id="other", solver_values=values | {"stack_3": values["stack_3"] + 1e-3}
    )
    with pytest.raises(ValueError, match="other: solver values differ"):
        report.point_solver_values([base, other])
    moved = dataclasses.replace(
        base,
        run_id="moved",
        solver_values=values | {"problem": dict(values["problem"]) | {"alpha": 0.61}},
    )
    with pytest.raises(ValueError, match="moved: solver values differ"):
        report.point_solver_values([base, moved])


def test_the_stricter_family_corrects_every_b_minus_c_test_at_once() -> None:
    """The b - c line of "not shown" under Holm over all b - c tests of the seeds table
    (both arms, both scores, every k), recomputed here by hand from each committed run's
    record, and the count of runs whose per-run interval is above zero everywhere."""
    key = report.INCREMENTAL_SAMPLED_KEY
    committed = report.load_runs(report.MEMORY_RUNS)
    # Each run's result.json as written (read here as plain JSON, not through the report).
    study = report.README.parent
    raw = {
        r.run_id: json.loads((study / r.arm / "results" / r.run_id / "result.json").read_text())
        for r in committed
    }
    runs = [r for r in committed if raw[r.run_id].get(key)]
    assert runs
    p_values = []
    for arm in sorted({r.arm for r in runs}):
        records = [raw[r.run_id][key] for r in runs if r.arm == arm]
        for name in ("agent_minus_control", "agent_minus_control_within_branch"):
            for k in sorted(records[0], key=lambda k: int(k[1:])):
                values = [record[k][name]["value"] for record in records]
                p_values.append(float(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue))
    m = len(p_values)
    ordered = sorted(p_values)
    holm = [min(1.0, max((m - j) * ordered[j] for j in range(i + 1))) for i in range(m)]
    assert holm == pytest.approx(sorted(holm_adjust(p_values)))
    above = sum(
        all(
            entry["low"] > 0.0
            for block in raw[r.run_id][key].values()
            for name, entry in block.items()
            if name in ("agent_minus_control", "agent_minus_control_within_branch")
        )
        for r in runs
    )
    line = next(line for line in report.memory_control_family(committed) if "sampled" in line)
    assert f"all {m} b - c tests" in line
    assert f"smallest Holm p {report._p(min(holm))}" in line
    assert f"{above} of {len(runs)}." in line
    assert ("not shown at any k" in line) == (min(holm) >= report.SHOWN_AT)
