"""The flagship README's generated tables (issue 52 items 2-4 and 6, issue 48 item 5):
regenerated from the committed run records, they must equal the README's blocks; the
statistics they print read as a reviewer would (Holm over each table, power at the stated
effect, "worth m" only where the filter rises). The memory-point tables are regenerated from
real smoke records of the two `_memory` leaves (tests/study/fixtures/, made with `rl-harness
experiments.mess3_belief_geometry.<leaf>.experiment --smoke --seed N`; test fixtures, never the
study's results), and the original study's figures from original_figures.json."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from experiments.mess3_belief_geometry import report

from rl_harness import Results, read_results
from rl_harness.analysis import holm_adjust, render_blocks

MEMORY_FIXTURES = Path(__file__).parent / "fixtures" / "mess3_belief_geometry_memory"


@pytest.fixture(scope="module")
def runs() -> list[report.StudyRun]:
    return report.load_runs(report.ORIGINAL_INIT_RUNS)


def fixture_ids() -> dict[str, tuple[str, ...]]:
    """The fixture runs by leaf (a leaf whose smoke runs did not finish has none)."""
    return {
        leaf: tuple(sorted(p.name for p in (MEMORY_FIXTURES / leaf / "results").iterdir()))
        for leaf in report.MEMORY_RUNS
        if (MEMORY_FIXTURES / leaf / "results").is_dir()
    }


@pytest.fixture(scope="module")
def memory_runs() -> list[report.StudyRun]:
    return report.load_runs(fixture_ids(), root=MEMORY_FIXTURES)


def test_readme_tables_are_the_records(runs) -> None:
    text = report.README.read_text(encoding="utf-8")
    tables = report.blocks(runs) | report.memory_blocks(report.load_runs(report.MEMORY_RUNS))
    assert render_blocks(text, tables) == text, (
        "README tables differ from the records: "
        "uv run python -m experiments.mess3_belief_geometry.report --write"
    )


def test_every_generated_table_has_a_block_and_a_missing_one_is_an_error() -> None:
    with pytest.raises(KeyError, match="report:controls_holm"):
        render_blocks("no blocks here", {"controls_holm": "x"})
    rendered = render_blocks(
        "a\n<!-- report:power -->\nold\n<!-- /report:power -->\nb", {"power": "new"}
    )
    assert rendered == "a\n<!-- report:power -->\nnew\n<!-- /report:power -->\nb"


def test_the_controls_family_is_holm_corrected(runs) -> None:
    table = report.controls_table(runs)
    assert "Holm over the 18 tests" in table
    # next_token_aux on random actions: raw p 0.010 is not shown after Holm (0.125)
    row = next(
        line
        for line in table.splitlines()
        if "next_token_aux | `random` | agent - untrained" in line
    )
    assert row.endswith("| 0.010 | 0.125 |")


def test_interventions_show_the_untrained_rows_and_their_difference(runs) -> None:
    table = report.interventions_table(runs)
    # reward_only seed 1 block_2: the untrained module's pre-clip correlation 0.74 beside 0.17
    assert (
        "| reward_only | 1 | block_2 | 3.2e-04 | 1.2e-03 | -8.9e-04 | 0.17 | 0.74 | -0.57 |"
        in table
    )
    assert "Holm over the 8 tests" in table


def test_power_uses_the_stated_effect_not_the_observed_one(runs, monkeypatch) -> None:
    before = report.power_table(runs)
    monkeypatch.setattr(report, "SESOI_R2", 0.04)
    after = report.power_table(runs)
    assert before != after  # the stated effect moves it; the observed means never enter
    assert "gain of 0.04" in after


def test_worth_m_is_undefined_where_the_filter_falls() -> None:
    rising = {"m1": 0.5, "m2": 0.7, "m3": 0.9}
    assert report.worth_m(rising, 0.6) == "2"
    assert report.worth_m(rising, 0.95) == "> 3"
    falling = {"m1": 0.378, "m2": 0.220, "m3": 0.708}
    assert report.worth_m(falling, 0.6).startswith("undefined (R² falls from m = 1 to 2")


def test_the_synthesis_writes_the_same_tables(runs) -> None:
    from experiments.mess3_belief_geometry.synthesis import experiment as synthesis

    folders = [
        report.STUDY_DIR / run.arm / "results" / run.run_id for run in reversed(runs)
    ]  # any order in: the synthesis sorts by arm and seed
    text = synthesis.reviewed_tables(folders)
    assert report.interventions_table(runs) in text
    assert report.controls_table(runs) in text
    # runs recorded before the controls on other data sets: the table says it was not made
    older = sorted((report.STUDY_DIR / "reward_only" / "results").glob("20261205T*"))
    assert "## controls_holm\n\nNot made for these runs (KeyError" in synthesis.reviewed_tables(
        older
    )


# ------------------------------------------------------------ the memory point (issue 52 item 2)


def _records(run: report.StudyRun) -> dict:
    folder = MEMORY_FIXTURES / run.arm / "results" / run.run_id
    return {
        name: json.loads((folder / f"{name}.json").read_text())
        for name in ("result", "solver_values", "run_manifest")
    }


def test_memory_runs_are_read_against_their_own_points_ceilings(memory_runs) -> None:
    assert {run.arm for run in memory_runs} <= set(report.MEMORY_RUNS)
    assert {run.task_point for run in memory_runs} == {"memory"}
    table = report.memory_returns_table(memory_runs)
    values = _records(memory_runs[0])["solver_values"]
    assert values["problem"]["alpha"] == 0.6 and values["problem"]["mixing"] == 0.1
    assert f"belief-MDP ceiling {values['belief_mdp']:.4f}" in table  # 0.9643, not 0.3819
    assert f"best stack-3 found {values['stack_3']:.4f}" in table
    assert "0.3819" not in table and "0.3679" not in table  # never the flagship's
    assert "solvers converged: belief_mdp yes, stack_3 yes, stack_2 yes, memoryless yes" in table
    for run in memory_runs:
        greedy = _records(run)["result"]["return_per_step"]["greedy"]
        row = (
            f"| {run.arm} | {run.seed} | `{run.run_id}` | {greedy:.4f} | "
            f"{greedy / values['belief_mdp']:.3f} | {greedy - values['stack_3']:+.4f} |"
        )
        assert row in table


def test_runs_of_different_points_are_never_pooled(runs, memory_runs) -> None:
    from experiments.mess3_belief_geometry.synthesis import experiment as synthesis

    mixed = [runs[0], memory_runs[0]]
    with pytest.raises(ValueError, match="never pooled"):
        report.one_point(mixed)
    with pytest.raises(ValueError, match="never pooled"):
        report.memory_returns_table(mixed)
    with pytest.raises(ValueError, match="flagship runs only"):
        report.blocks(memory_runs)
    with pytest.raises(ValueError, match="memory runs only"):
        report.memory_blocks(runs)
    folders = [
        report.STUDY_DIR / runs[0].arm / "results" / runs[0].run_id,
        MEMORY_FIXTURES / memory_runs[0].arm / "results" / memory_runs[0].run_id,
    ]
    by_point = synthesis.points(folders[::-1])
    assert list(by_point) == ["flagship", "memory"]  # grouped, the flagship first
    assert by_point["memory"] == folders[1:]
    assert synthesis.point_values(by_point["memory"])["belief_mdp"] == pytest.approx(0.96428, 1e-4)
    with pytest.raises(ValueError, match="never pooled"):
        synthesis.reviewed_tables(folders)


def test_the_memory_incremental_tables_are_the_records(memory_runs) -> None:
    from scipy import stats

    per_run = report.memory_incremental_runs_table(memory_runs)
    across = report.memory_incremental_seeds_table(memory_runs)
    for arm in {run.arm for run in memory_runs}:
        arm_runs = [run for run in memory_runs if run.arm == arm]
        headlines = [_records(run)["result"]["incremental_r2"] for run in arm_runs]
        ks = sorted(headlines[0], key=lambda key: int(key[1:]))
        assert len(ks) >= 2  # the smoke budget's window_k_max
        for run, headline in zip(arm_runs, headlines, strict=True):
            for key in ks:
                b_a = headline[key]["agent_increment_within_branch"]
                row = (
                    f"| {arm} | {run.seed} | {key[1:]} | within tokens_2 | "
                    f"{headline[key]['r2_window_within_branch']:.3f} | "
                    f"{b_a['value']:+.3f} [{b_a['low']:+.3f}, {b_a['high']:+.3f}] |"
                )
                assert row in per_run
        for quantity, label in report.INCREMENT_QUANTITIES.items():
            values = {key: [h[key][quantity]["value"] for h in headlines] for key in ks}
            ps = [  # one seed: no test (the fixtures hold what the loaded machine finished)
                float(stats.ttest_1samp(values[key], 0.0, alternative="greater").pvalue)
                if len(values[key]) > 1
                else None
                for key in ks
            ]
            adjusted = holm_adjust(ps)
            for key, p, p_holm in zip(ks, ps, adjusted, strict=True):
                mean = sum(values[key]) / len(values[key])
                line = next(
                    line
                    for line in across.splitlines()
                    if line.startswith(f"| {arm} | {label} | global | {key[1:]} | ")
                )
                interval = " [" if len(values[key]) > 1 else f" ({len(values[key])})"
                assert f"{mean:+.3f}{interval}" in line and f"({len(values[key])})" in line
                assert f"| {report._p(p)} | {report._p(p_holm)} |" in line
    # Three seeds made from a real record (b - a set to 0.5, 0.55, 0.6 at every k): the
    # across-seed row is scipy's one-sided t-test and Holm over k.
    seeds = [_shifted(memory_runs[0], 0.5, seed) for seed in (0, 1, 2)]
    label_b_a = report.INCREMENT_QUANTITIES["agent_increment"]
    across = report.memory_incremental_seeds_table(seeds)
    values = [0.5, 0.55, 0.6]
    p = float(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue)
    line = next(
        line
        for line in across.splitlines()
        if line.startswith(f"| {memory_runs[0].arm} | {label_b_a} | global | 1 | ")
    )
    assert "+0.550 [" in line and "(3)" in line
    assert f"| {report._p(p)} | {report._p(min(1.0, 2 * p))} |" in line  # Holm over k = 1, 2


def _planted_arm(run: report.StudyRun, arm: str, delta: float) -> report.StudyRun:
    """A copy of a real record as `arm`, every shared-data score moved by `delta` (a known
    paired difference), its own rollouts' score moved by 10 (which must not enter)."""
    metrics = dict(run.result.metrics)
    for data in report.DATA_SETS:
        for key in ("agent_r2_within_branch", "agent_minus_untrained_within_branch"):
            metric = metrics[f"controls_by_data/{data}/{key}"]
            moved = metric.value + (10.0 if data == "agent_greedy" else delta)
            metrics[f"controls_by_data/{data}/{key}"] = dataclasses.replace(metric, value=moved)
    return dataclasses.replace(run, arm=arm, result=Results(metrics))


def test_the_arms_are_compared_on_shared_data_only(memory_runs) -> None:
    first, second = report.MEMORY_RUNS
    base = [run for run in memory_runs if run.arm == first]
    runs = (
        base
        + [_planted_arm(run, second, 0.1 + 0.01 * index) for index, run in enumerate(base)]
        + [_planted_arm(dataclasses.replace(base[0], seed=7), first, 0.0)]
    )  # seed 7: one arm only
    tests = report.memory_arm_tests(runs)
    assert [t["data"] for t in tests] == ["belief_mdp", "belief_mdp", "random", "random"]
    for entry in tests:  # paired by seed, only seeds both arms ran, agent_greedy never
        assert entry["seeds"] == sorted(run.seed for run in base)
        assert entry["differences"] == pytest.approx([0.1 + 0.01 * i for i in range(len(base))])
    assert [t["p_holm"] for t in tests] == holm_adjust([t["p"] for t in tests])
    table = report.memory_arms_table(runs)
    assert "`agent_greedy`" not in table.split("|---|")[-1]  # no row of own rollouts
    assert f"Holm over the {len(tests)} tests" in table
    # The fixtures' own records, when both arms are there: the differences are the records'.
    if {run.arm for run in memory_runs} == {first, second}:
        by = {(run.arm, run.seed): _records(run)["result"] for run in memory_runs}
        for entry in report.memory_arm_tests(memory_runs):
            key = (
                "agent_r2_within_branch"
                if entry["label"] == "agent within-branch R²"
                else "agent_minus_untrained_within_branch"
            )
            expected = [
                by[(second, s)]["controls_by_data"][entry["data"]][key]
                - by[(first, s)]["controls_by_data"][entry["data"]][key]
                for s in entry["seeds"]
            ]
            assert entry["differences"] == pytest.approx(expected)


def _shifted(run: report.StudyRun, shift: float, seed: int) -> report.StudyRun:
    """The run as seed `seed` with every b - a set to `shift` plus a little (a planted,
    consistent effect the line must report; two such copies make a testable pair)."""
    metrics = dict(run.result.metrics)
    for k in report.incremental_ks(run.result):
        name = f"incremental_r2/k{k}/agent_increment"
        metrics[name] = dataclasses.replace(metrics[name], value=shift * (1 + 0.1 * seed))
    return dataclasses.replace(run, seed=seed, result=Results(metrics))


def test_what_is_not_shown_is_computed_from_the_table(memory_runs) -> None:
    text = report.memory_not_shown(memory_runs)
    for arm, table in report.memory_increments(memory_runs).items():
        rows = table["agent_increment"]
        missing = [r["k"] for r in rows if r["p_holm"] is None or r["p_holm"] >= 0.05]
        line = next(
            line
            for line in text.splitlines()
            if line.startswith(f"- `{arm}`, global") and "beyond the k-step window" in line
        )
        if missing:
            assert f"not shown at k = {', '.join(map(str, missing))}" in line
        else:
            assert "shown at every k" in line
    # A planted, consistent increment of 0.5 in every seed and k: shown at every k.
    planted = report.memory_not_shown(
        [_shifted(run, 0.5, seed) for run in memory_runs for seed in (100, 101, 102)]
    )
    for arm in {run.arm for run in memory_runs}:
        line = next(
            line
            for line in planted.splitlines()
            if line.startswith(f"- `{arm}`, global") and "beyond the k-step window" in line
        )
        assert "shown at every k (1, 2)" in line, line
    empty = report.memory_not_shown([])
    assert empty.startswith("Nothing at the memory point is shown yet")


@pytest.mark.slow
def test_the_synthesis_reads_the_memory_point_against_its_own_solver_values(tmp_path) -> None:
    root = tmp_path / "study"
    shutil.copytree(MEMORY_FIXTURES, root)
    cli = Path(sys.executable).with_name("rl-harness")
    completed = subprocess.run(
        [
            str(cli),
            "experiments.mess3_belief_geometry.synthesis.experiment",
            "--smoke",
            "--run-id",
            "synthesis",
            "--results-dir",
            str(tmp_path / "synthesis" / "results"),
            "--artifacts-dir",
            str(tmp_path / "synthesis" / "artifacts"),
            "--no-upload-artifacts",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ | {"MESS3_BELIEF_GEOMETRY_RUNS": str(root)},
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    out = tmp_path / "synthesis" / "results" / "synthesis"
    result = read_results(out)
    points = {name.split("/")[1] for name in result if name.startswith("points/")}
    assert list(points) == ["memory"]  # no flagship run in this root
    values = json.loads(next(root.glob("*/results/*/solver_values.json")).read_text())
    assert result.value("points/memory/solver_values/belief_mdp") == values["belief_mdp"]
    table = (out / "memory" / "study_table.md").read_text()
    assert f"| belief-MDP ceiling | {values['belief_mdp']:.4f} | yes |" in table
    assert "alpha 0.6" in table and "mixing 0.1" in table
    memory_runs = report.load_runs(fixture_ids(), root=root)
    assert report.memory_incremental_seeds_table(memory_runs) in table
    assert report.memory_not_shown(memory_runs) in table


# ------------------------------------------------------------ the original study (item 6)


def test_the_original_figures_name_their_source_and_agree_with_each_other() -> None:
    record = report.read_original_figures()
    assert record["repository"] == "Al-does/RL-Harness"
    for figure in record["figures"]:
        assert re.fullmatch(r"[0-9a-f]{40}", figure["commit"]), figure
        assert figure["path"].startswith("results/phase3/") and figure["env_steps"] is not None
    # Two files of the original, one check on the transcription: arms_table.json's mean and
    # sd over seeds are those of the per-seed probe_curve.json finals (the sd with divisor n).
    for arm in ("reward_only", "next_token_aux"):
        finals = [
            f
            for f in record["figures"]
            if f["arm"] == arm and isinstance(f["env_steps"], int) and f["env_steps"] > 10**7
        ]
        table = next(f for f in record["figures"] if f["arm"] == arm and f["seed"] is None)
        for key, theirs in (("r2_fine_depth2", "r2_fine"), ("reward_greedy", "reward_greedy")):
            values = [f["values"][key] for f in finals]
            mean = sum(values) / 3
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 3)
            assert table["values"][theirs] == pytest.approx([mean, sd], rel=1e-9)


def test_the_original_table_is_the_json_and_the_records(runs) -> None:
    record = report.read_original_figures()
    table = report.original_table(runs, record)
    rows = [line for line in table.splitlines() if re.match(r"\| \w+ \(a_", line)]
    matched = [row for row in rows if row.count("|") == 8]
    assert len(matched) == 2 * 7 * 2  # 2 arms x iterations 0..32 x 2 quantities
    for row in matched:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        arm = cells[0].split()[0]
        ours_steps = int(cells[1].split(" / ")[0].replace(",", ""))
        key, theirs_key = report.ORIGINAL_QUANTITIES[cells[2]]
        arm_runs = [run for run in runs if run.arm == arm]
        ours = [
            next(c for c in run.checkpoints if c["env_steps"] == ours_steps)[key]["value"]
            for run in arm_runs
        ]
        theirs = [
            f["values"][theirs_key]
            for f in record["figures"]
            if f["arm"] == arm
            and f["seed"] is not None
            and isinstance(f["env_steps"], int)
            and abs(f["env_steps"] - ours_steps) <= 0.001 * max(ours_steps, 1)
        ]
        assert len(theirs) == 3
        assert cells[3] == ", ".join(f"{v:.3f}" for v in ours)
        assert cells[4] == ", ".join(f"{v:.3f}" for v in theirs)
        mean = sum(ours) / 3
        assert cells[5] == f"{mean - sum(theirs) / 3:+.3f}"
        beyond = not min(theirs) <= mean <= max(theirs)
        assert cells[6].startswith("beyond it") == beyond
        # At step 0, where original_protocol.json exists, the data protocol's measured share
        # is named and what it leaves is still called unexplained.
        measured = ours_steps == 0 and report.ORIGINAL_PROTOCOL.is_file()
        assert ("measured with the original's data protocol" in cells[6]) == (beyond and measured)
        assert ("unexplained" in cells[6]) == beyond
        if beyond:  # training-only causes cannot act before training
            assert ("kl" in cells[6]) == (ours_steps > 0)
    # Our end has no matched checkpoint of the original, and says so; the original's end is
    # shown per seed (probe_curve.json) beside its arms_table.json mean ± sd.
    assert "No matched checkpoint" in table and "reward_only at 2,031,616" in table
    for arm in ("reward_only", "next_token_aux"):
        finals = [
            f["values"]["r2_fine_depth2"]
            for f in record["figures"]
            if f["arm"] == arm and isinstance(f["env_steps"], int) and f["env_steps"] > 10**7
        ]
        ours = [run.result.value("env_steps") for run in runs if run.arm == arm]
        row = next(
            line
            for line in table.splitlines()
            if line.startswith(f"| {arm} (")
            and f"{int(ours[0]):,} / final (10.03M) | R² within tokens_2" in line
        )
        assert ", ".join(f"{v:.3f}" for v in finals) + ";" in row


def test_a_failed_run_counts_only_with_its_recorded_analysis_rerun(tmp_path) -> None:
    """A run whose in-run analysis failed is read only with a record of its rerun
    (analysis_rerun.json, or `rl-harness analyze`'s provenance of both stages) and its
    result.json, and the memory tables name it; without such a record it is refused."""
    (leaf, ids), *_ = [(leaf, ids) for leaf, ids in fixture_ids().items() if ids]
    source = MEMORY_FIXTURES / leaf / "results" / ids[0]
    folder = tmp_path / leaf / "results" / ids[0]
    shutil.copytree(source, folder)
    manifest = json.loads((folder / "run_manifest.json").read_text())
    (folder / "run_manifest.json").write_text(json.dumps(manifest | {"status": "failed"}))
    with pytest.raises(FileNotFoundError, match="no completed run_manifest.json"):
        report.read_run(folder)
    rerun = {"analysis_library_commit": "abcdef0123", "why": "the interventions stage failed"}
    (folder / report.ANALYSIS_RERUN).write_text(json.dumps(rerun))
    run = report.read_run(folder)
    assert run.analysis_rerun == {"file": report.ANALYSIS_RERUN} | rerun
    note = report.memory_blocks([run])["memory_returns"]
    assert f"`{ids[0]}` ({leaf}, seed {run.seed}): library `abcdef0`" in note
    assert "analysis_rerun.json says why" in note
    assert "Analysis rerun" not in report.memory_blocks([report.read_run(source)])["memory_returns"]

    # `rl-harness analyze`'s provenance counts when both stages ran (a failed in-run
    # analysis never records its own); the analysis stage alone does not.
    (folder / report.ANALYSIS_RERUN).unlink()
    stage = {"library": {"commit": "0123456789ab"}, "started_utc": "2026-12-07T09:00:00Z"}
    provenance = folder / report.ANALYSIS_PROVENANCE
    provenance.write_text(json.dumps({"stages": {"analysis": stage}}))
    with pytest.raises(FileNotFoundError, match="no completed run_manifest.json"):
        report.read_run(folder)
    provenance.write_text(json.dumps({"stages": {"analysis": stage, "result": stage}}))
    note = report.memory_blocks([report.read_run(folder)])["memory_returns"]
    assert f"`{ids[0]}` ({leaf}, seed {run.seed}): library `0123456`" in note
    assert "analysis_provenance.json says why" in note


def test_an_interrupted_run_counts_only_fully_trained_with_its_analysis_rerun(tmp_path) -> None:
    """A retrain's in-run analysis is stopped by a signal (`interrupted`) and rerun by
    `rl-harness analyze`: it counts only when it trained every iteration of its budget and
    the rerun recorded both stages; a run interrupted during training never counts."""
    (leaf, ids), *_ = [(leaf, ids) for leaf, ids in fixture_ids().items() if ids]
    folder = tmp_path / leaf / "results" / ids[0]
    shutil.copytree(MEMORY_FIXTURES / leaf / "results" / ids[0], folder)
    manifest = json.loads((folder / "run_manifest.json").read_text())
    (folder / "run_manifest.json").write_text(json.dumps(manifest | {"status": "interrupted"}))
    stage = {"library": {"commit": "0123456789ab"}, "started_utc": "2026-12-07T18:00:00Z"}
    with pytest.raises(FileNotFoundError, match="no completed run_manifest.json"):
        report.read_run(folder)  # no rerun recorded
    provenance = folder / report.ANALYSIS_PROVENANCE
    provenance.write_text(json.dumps({"stages": {"analysis": stage, "result": stage}}))
    run = report.read_run(folder)
    assert run.analysis_rerun is not None
    assert run.analysis_rerun["analysis_library_commit"] == "0123456789ab"

    summary = json.loads((folder / "summary.json").read_text())
    iterations = manifest["budget"]["settings"]["iterations"]
    assert summary["final_metrics"]["training_iteration"] == iterations
    summary["final_metrics"]["training_iteration"] = iterations - 1  # stopped while training
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(FileNotFoundError, match="fully trained"):
        report.read_run(folder)


def test_a_retrain_is_shown_beside_its_committed_run(memory_runs) -> None:
    """The retrains' table pairs each retrain with the committed run of its arm and seed,
    with both first-iteration returns to 7 digits; a retrain without one is an error."""
    run = dataclasses.replace(memory_runs[0], first_return=7.5892537)  # fixtures: no metrics
    retrain = dataclasses.replace(run, run_id="retrain-id", first_return=7.5892547)
    table = report.retrained_table([retrain], [run])
    row = next(line for line in table.splitlines() if "`retrain-id`" in line)
    assert f"`{run.run_id}`" in row
    assert "| 7.5892537 / 7.5892547 |" in row
    with pytest.raises(ValueError, match="retrain-id: no committed"):
        report.retrained_table([retrain], [dataclasses.replace(run, seed=run.seed + 100)])
    assert "RETRAINED_RUNS` is empty" in report.retrained_table([], [run])


def test_the_first_return_is_read_from_metrics(tmp_path) -> None:
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"env_runners/episode_return_mean": 7.589253704156645}) + "\n{}\n"
    )
    assert report._first_return(tmp_path) == 7.589253704156645
    assert report._first_return(tmp_path / "nowhere") is None


def _as_full(run: report.StudyRun) -> report.StudyRun:
    """A real CPU record relabelled as a FULL run: its checkpoints moved to the FULL schedule's
    steps (0, then the first iteration past each doubling of 32,768 steps, then 306), its end
    at 10,027,008 steps, its budget named `full`."""
    steps = [0] + [32_768 * 2**i for i in range(9)] + [10_027_008]
    checkpoints = [
        dict(run.checkpoints[min(i, len(run.checkpoints) - 1)], env_steps=s)
        for i, s in enumerate(steps)
    ]
    metrics = dict(run.result.metrics)
    metrics["env_steps"] = dataclasses.replace(metrics["env_steps"], value=10_027_008)
    return dataclasses.replace(
        run, checkpoints=tuple(checkpoints), result=Results(metrics), budget="full"
    )


def test_a_full_run_is_matched_to_the_original_up_to_its_end(runs) -> None:
    record = report.read_original_figures()
    full = [_as_full(run) for run in runs if run.arm == "reward_only" and run.seed == 0]
    table = report.original_table(full, record, runs_name="FULL_RUNS")
    assert "`report.FULL_RUNS`" in table
    rows = [line for line in table.splitlines() if line.startswith("| reward_only (a_")]
    matched = [row for row in rows if row.count("|") == 8]
    # The original's 11 checkpoints (0, the doublings from 32,768 to 8,388,608, then
    # 10,027,008) are the FULL schedule's: every one matched, two quantities each.
    ends = sorted({int(r.split("|")[2].split(" / ")[0].replace(",", "")) for r in matched})
    assert ends == [0] + [32_768 * 2**i for i in range(9)] + [10_027_008]
    assert len(matched) == 11 * 2
    assert "Every checkpoint of ours matched" in table and "No matched checkpoint" not in table
    # No "nearest checkpoint" rows past the original's end; the end beside its final summary.
    assert not any("sampled" in row for row in rows if row.count("|") == 7)
    assert any("10,027,008 / final (10.03M) | R² within tokens_2" in row for row in rows)
    # Matched at the end: the unmatched rows' cause (`steps`) is not offered there.
    end_rows = [row for row in rows if "/ final (10.03M)" in row and "beyond it" in row]
    assert all("steps" not in row.split("candidate causes:")[-1] for row in end_rows)


def test_the_full_tables_take_full_runs_only(runs) -> None:
    assert set(report.full_blocks([]).values()) == {report.NO_FULL_RUNS}
    cpu = [run for run in runs if run.arm == "reward_only" and run.seed == 0]
    with pytest.raises(ValueError, match="not only full"):
        report.full_blocks(cpu)
    assert cpu[0].budget == "cpu"  # read from the manifest


@pytest.fixture(scope="module")
def retrains() -> list[report.StudyRun]:
    return report.load_runs(report.RETRAINED_RUNS)


def test_added_seeds_pool_with_the_retrains_as_one_experiment(retrains) -> None:
    """Seeds added to the retrains (issue 53 item 4) are read with them: the pooled tables are
    the flagship's tables on every pooled run, the added runs' incremental table theirs
    alone; the pool refuses a seed twice and runs trained or analysed at other commits."""
    assert set(report.added_seed_blocks(retrains, []).values()) == {report.NO_ADDED_SEEDS}
    first = [run for run in retrains if run.seed < 2]
    added = [run for run in retrains if run.seed == 2]
    tables = report.added_seed_blocks(first, added)
    for name in report.POOLED_TABLES:
        assert tables[f"pooled_{name}"] == report.TABLES[name](retrains)
    assert "| 3 |" in tables["pooled_seeds"]  # three seeds per arm across the pool
    assert tables["pooled_incremental_sampled_seeds"] == report.memory_incremental_seeds_table(
        retrains, report.INCREMENTAL_SAMPLED_KEY
    )
    assert tables["added_incremental_runs"] == report.memory_incremental_runs_table(added)
    assert all(f"| {run.arm} | 2 |" in tables["added_incremental_runs"] for run in added)
    assert not any(f"| {run.arm} | 0 |" in tables["added_incremental_runs"] for run in first)
    with pytest.raises(ValueError, match="pooled twice"):
        report.added_seed_blocks(retrains, added)
    other = [dataclasses.replace(added[0], library_commit="0" * 40), *added[1:]]
    with pytest.raises(ValueError, match="one training and one analysis commit"):
        report.added_seed_blocks(first, other)
    rerun = dict(added[0].analysis_rerun or {}, analysis_library_commit="f" * 40)
    other = [dataclasses.replace(added[0], analysis_rerun=rerun), *added[1:]]
    with pytest.raises(ValueError, match="one training and one analysis commit"):
        report.added_seed_blocks(first, other)
    assert {run.library_commit for run in retrains} == {"d2c7c583685b9a9af67bac7ab7f2108ae3d73253"}
