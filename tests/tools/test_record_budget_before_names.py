"""A run recorded before budgets had names keeps its smoke budget (issue 49, "Also"): its
manifest says only `options.smoke: true`, and the readers (`RunRecord.budget`, `rl-harness
runs`, `compare`) still read "smoke", never "unrecorded". On records made by real
(Ray-free) CLI runs, the smoke one rewritten to the manifest form of that time."""

from __future__ import annotations

import json
from pathlib import Path

from rl_harness.cli import main
from rl_harness.harness.runtools.records import RunRecord
from tests.tools.test_loud_records import RECIPE


def _pre_budget_names(run: Path) -> None:
    """The records as a run made before budgets had names left them: no `options.budget`,
    no `options.set`, no `budget` in the manifest or config.json."""
    path = run / "run_manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["budget"], manifest["options"]["budget"], manifest["options"]["set"]
    path.write_text(json.dumps(manifest))
    (run / "config.json").write_text(json.dumps({"lr": 0.001}))


def test_a_smoke_run_recorded_before_budgets_had_names_reads_smoke(tmp_path, capsys):
    leaf = tmp_path / "study" / "arm" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(RECIPE)
    results = leaf.parent / "results"
    assert main([str(leaf), "--seed", "0", "--run-id", "cpu0"]) == 0
    assert main([str(leaf), "--seed", "1", "--smoke", "--run-id", "old"]) == 0
    _pre_budget_names(results / "old")
    options = json.loads((results / "old" / "run_manifest.json").read_text())["options"]
    assert options["smoke"] is True and "budget" not in options

    assert RunRecord.read(results / "old").budget == "smoke"
    assert RunRecord.read(results / "cpu0").budget == "cpu"
    capsys.readouterr()
    assert main(["runs", str(tmp_path / "study")]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    column = header.split().index("budget")
    budgets = {row.split()[0]: row.split()[column] for row in rows if row.strip()}
    assert budgets == {"cpu0": "cpu", "old": "smoke"}
    # compare refuses to pool it with the cpu run, and names it as smoke.
    assert main(["compare", str(tmp_path / "study"), "--metric", "value"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "runs of 2 budgets would be pooled (cpu: cpu0; smoke: old)" in line
