"""`rl-harness analyze` (issue 48 item 2) through the user's path: a real run made through the
CLI whose run() calls its declared ANALYSIS_STAGES, then the command on it: provenance per
stage, a current stage skipped, `--stage`, a changed input making that stage stale, and one
error line for each kind of bad input."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from rl_harness.analysis.stages import read_provenance
from rl_harness.cli import main as cli_main

RECIPE = """
import json
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import run_algorithm
from rl_harness.analysis import AnalysisStage, run_checkpoints, run_stages


@dataclass(frozen=True)
class Budget:
    iterations: int
    batch: int


BUDGETS = {"smoke": Budget(1, 64), "cpu": Budget(2, 64)}
DEFAULT_BUDGET = "cpu"


def count(context):
    rows = (context.results_dir / "metrics.jsonl").read_text().splitlines()
    record = {
        "rows": len(rows),
        "checkpoints": [c.iteration for c in run_checkpoints(context.results_dir)],
        "seed": context.seed,
        "batch": context.settings.batch,
    }
    (context.results_dir / "count.json").write_text(json.dumps(record))
    return record


def double(context):
    record = json.loads((context.results_dir / "count.json").read_text())
    out = {"twice_rows": 2 * record["rows"]}
    (context.results_dir / "double.json").write_text(json.dumps(out))
    return out


ANALYSIS_STAGES = (
    AnalysisStage("count", count, reads=("metrics.jsonl",), writes=("count.json",)),
    AnalysisStage(
        "double", double, reads=("count.json",), checkpoints=False, writes=("double.json",)
    ),
)


def run(context):
    plan = context.settings
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=plan.batch)
        .training(train_batch_size_per_learner=plan.batch, minibatch_size=32, num_epochs=1)
    )
    run_algorithm(config, context, stop=plan.iterations, checkpoint_every=1)
    return dict(run_stages(context, ANALYSIS_STAGES)["double"].record)
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory, ray_session) -> Path:
    """A study of two leaves (the same recipe); one finished run of `leaf`, seed 3."""
    root = tmp_path_factory.mktemp("analyze_study")
    for name in ("leaf", "other"):
        (root / name).mkdir()
        (root / name / "experiment.py").write_text(textwrap.dedent(RECIPE))
    argv = [str(root / "leaf" / "experiment.py"), "--set", "batch=128", "--seed", "3"]
    code = cli_main([*argv, "--run-id", "done", "--no-upload-artifacts"])
    assert code == 0, (root / "leaf" / "results" / "done" / "error.txt").read_text()
    return root


def analyze(study: Path, *args: str) -> int:
    return cli_main(["analyze", str(study / "leaf" / "experiment.py"), *args])


def test_the_in_run_stages_record_their_provenance(study: Path) -> None:
    run = study / "leaf" / "results" / "done"
    assert json.loads((run / "result.json").read_text()) == {"twice_rows": 4}
    assert json.loads((run / "count.json").read_text()) == {
        "rows": 2,
        "checkpoints": [1, 2],
        "seed": 3,
        "batch": 128,  # the run's --set, as the reopened context gives it too
    }
    provenance = read_provenance(run)
    assert list(provenance) == ["count", "double"]
    count = provenance["count"]
    assert sorted(count["inputs"]) == ["checkpoint/1", "checkpoint/2", "metrics.jsonl"]
    assert all(len(value) == 64 for value in count["inputs"].values())  # sha256 hex
    assert count["library"]["commit"] and count["budget"] == "cpu"
    assert count["overrides"] == {"batch": "128"} and count["settings"]["batch"] == 128
    assert count["writes"] == ["count.json"] and count["seconds"] >= 0
    assert list(provenance["double"]["inputs"]) == ["count.json"]


def test_a_second_call_skips_every_current_stage(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"
    before = (run / "analysis_provenance.json").read_bytes()
    assert analyze(study) == 0  # every completed run of the leaf: this one
    out = capsys.readouterr().out
    assert "stage count: current, skipped" in out and "stage double: current, skipped" in out
    assert (run / "analysis_provenance.json").read_bytes() == before


def test_force_reruns_and_writes_the_same_records(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"
    records = {name: (run / name).read_bytes() for name in ("count.json", "double.json")}
    old = read_provenance(run)
    assert analyze(study, "done", "--force") == 0
    out = capsys.readouterr().out
    assert "stage count: running (forced)" in out and "stage double: running (forced)" in out
    assert {name: (run / name).read_bytes() for name in records} == records
    new = read_provenance(run)
    assert new["count"]["inputs"] == old["count"]["inputs"]
    assert new["count"]["started_utc"] > old["count"]["started_utc"]


def test_one_stage_and_a_changed_input_makes_only_its_reader_stale(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"
    assert analyze(study, str(run), "--stage", "double", "--force") == 0
    out = capsys.readouterr().out
    assert "stage double: running" in out and "stage count" not in out

    (run / "count.json").write_text(json.dumps({"rows": 5}))  # an input of `double` only
    assert analyze(study, "done") == 0
    out = capsys.readouterr().out
    assert "stage count: current, skipped" in out
    assert "stage double: running (stale: inputs changed: count.json)" in out
    assert json.loads((run / "double.json").read_text()) == {"twice_rows": 10}
    assert analyze(study, "done") == 0  # and current again
    assert "stage double: current, skipped" in capsys.readouterr().out


def test_bad_input_is_one_error_line(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"

    def error(*argv: str) -> str:
        assert cli_main(["analyze", *argv]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rl-harness analyze: error: ")
        return lines[0]

    leaf = str(study / "leaf" / "experiment.py")
    assert "unknown stage 'nope'; this leaf declares: count, double" in error(
        leaf, "--stage", "nope"
    )
    assert "not a run folder nor a run id" in error(leaf, "missing-run")
    other = str(study / "other" / "experiment.py")
    assert "not of" in error(other, str(run))  # a run of another leaf
    assert "no completed run under" in error(other)

    artifacts = study / "leaf" / "artifacts" / "done"
    moved = artifacts.with_name("done.moved")
    shutil.move(artifacts, moved)
    try:
        assert "artifacts missing" in error(leaf, "done")
        # A stage that reads no checkpoint still runs without them.
        assert cli_main(["analyze", leaf, "done", "--stage", "double", "--force"]) == 0
    finally:
        shutil.move(moved, artifacts)

    bare = study / "bare"
    bare.mkdir()
    (bare / "experiment.py").write_text("def run(context):\n    return {}\n")
    assert "declares no ANALYSIS_STAGES" in error(str(bare / "experiment.py"))
