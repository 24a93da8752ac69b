"""The action-symmetry README's generated tables (issue 50 item 7): regenerated from the
committed records (our runs named in report.RUNS, the original's in original_figures.json)
they must equal the README's blocks; a leaf with no run says so; a run's record lands in
its leaf's table beside the original's, and a changed original figure fails the check."""

from __future__ import annotations

import json
import shutil

import pytest
from experiments.mess3_action_symmetry import report

from rl_harness import Results
from rl_harness.analysis import readme_main, render_blocks


@pytest.fixture(scope="module")
def original() -> dict:
    return report.load_original()


def test_readme_tables_are_the_records(original) -> None:
    text = report.README.read_text(encoding="utf-8")
    assert render_blocks(text, report.blocks(report.load_runs(), original)) == text, (
        "README tables differ from the records: "
        "uv run python -m experiments.mess3_action_symmetry.report --write"
    )
    assert report.main(["--check"]) == 0


def test_every_original_figure_in_the_tables_is_its_record(original) -> None:
    tables = report.blocks([], original)
    for run in original["runs"]:
        table = tables[run["leaf"]]
        assert f"blob/{run['commit']}/{run['path']}" in table
        final = run["final"]
        row = next(
            line
            for line in table.splitlines()
            if line.endswith(f"{final['mse'] / final['branch_baseline_mse']:.1f} |")
            and "final" in line
        )
        assert f"| {final['env_steps']:,} |" in row
        assert f"| {final['reward_state_2_fraction_greedy']:.4f} |" in row
        assert f"| {final['r_squared']:.4f} |" in row
        assert "not run yet" in table  # no run of ours is named yet
    assert "1 (42): no spread" in tables["spread"]


def _fake_run(root, leaf: str, run_id: str, seed: int, result: dict) -> None:
    folder = root / leaf / "results" / run_id
    folder.mkdir(parents=True)
    manifest = {"status": "completed", "seed": seed, "budget": {"name": "cpu", "settings": {}}}
    (folder / "run_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")


def _result(**changed: float) -> dict:
    """A result.json in the named form the study writes (shared.summary)."""
    values = {
        "env_steps": 1_015_808,
        "greedy_action_fraction/noop": 0.0,
        "greedy_action_fraction/positive": 1.0,
        "greedy_action_fraction/negative": 0.0,
        "reward_state_2_fraction_greedy": 0.25,
        "oracle_agreement_greedy": 1.0,
        "oracle_agreement_sampled": 0.9,
        "greedy_noop_fraction/state_0": 0.0,
        "greedy_noop_fraction/state_1": 0.0,
        "greedy_noop_fraction/state_2": 0.0,
        "sampled_noop_fraction/state_0": 0.01,
        "sampled_noop_fraction/state_1": 0.02,
        "sampled_noop_fraction/state_2": None,
        "probe_r2": 0.95,
        "probe_mse": 0.001,
        "branch_baseline_mse": 0.0001,
    } | changed
    results = Results()
    for name, value in values.items():
        results.add(name, value)
    return results.to_json()


def test_a_named_run_lands_beside_the_original(tmp_path, original) -> None:
    _fake_run(tmp_path, "variant_2", "run-a", 0, _result())
    _fake_run(tmp_path, "variant_2", "run-b", 1, _result(reward_state_2_fraction_greedy=0.27))
    runs = report.load_runs({"variant_2": ("run-b", "run-a")}, root=tmp_path)
    assert [run.seed for run in runs] == [0, 1]
    tables = report.blocks(runs, original)
    row = next(line for line in tables["variant_2"].splitlines() if "`run-a`" in line)
    assert row.startswith("| ours `run-a` (cpu) | 0 | 1,015,808 | 0.000 / 1.000 / 0.000 |")
    assert "| 1.000 / 0.900 |" in row and "0.010 / 0.020 / -" in row and row.endswith("| 10.0 |")
    assert "not run yet" not in tables["variant_2"]
    assert "not run yet" in tables["variant_2_no_delay"]
    assert "| variant_2 | ours (cpu) | 2 | 0.260 (0.250-0.270) |" in tables["spread"]


def test_a_continued_run_names_the_run_it_continues(tmp_path, original) -> None:
    """A `--resume-from` run (manifest `parent`) is labelled with its parent and the
    iteration it continued from, here and in the committed 10M run's row."""
    _fake_run(tmp_path, "variant_2", "run-c", 42, _result())
    manifest_path = tmp_path / "variant_2" / "results" / "run-c" / "run_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    parent = {"run_id": "run-p", "iteration": 128, "env_steps": 4_194_304}
    manifest_path.write_text(json.dumps(manifest | {"parent": parent}))
    (run,) = report.load_runs({"variant_2": ("run-c",)}, root=tmp_path)
    assert run.parent == ("run-p", 128)
    row = next(
        line for line in report.blocks([run], original)["variant_2"].splitlines() if "run-c" in line
    )
    assert row.startswith("| ours `run-c` (cpu, continuing `run-p` from its iteration 128) | 42 |")

    (committed,) = [r for r in report.load_runs() if r.parent is not None]
    assert committed.run_id == "20261207T173338Z-ac5a9eb5"
    assert committed.parent == ("20261207T152301Z-34823a0b", 128)


def test_a_changed_original_figure_fails_the_check(tmp_path, original, capsys) -> None:
    readme = tmp_path / "README.md"
    shutil.copy(report.README, readme)
    changed = json.loads(json.dumps(original))
    changed["runs"][0]["final"]["r_squared"] += 0.01
    assert readme_main(readme, lambda: report.blocks([], changed), prog="r", argv=["--check"]) == 1
    assert "generated tables differ" in capsys.readouterr().err
