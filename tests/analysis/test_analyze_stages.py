"""`rl-harness analyze` (issue 48 item 2) through the user's path: a real run made through the
CLI whose run() calls its declared ANALYSIS_STAGES, then the command on it: provenance per
stage, a current stage skipped, `--stage`, a changed input making that stage stale, and one
error line for each kind of bad input. The stages' machinery needs no training (a recipe
that writes its data itself, no Ray); a real RLlib run shows checkpoints hashed as inputs and
a run whose artifacts are gone refused."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rl_harness.analysis.reopen import reopen_run
from rl_harness.analysis.stages import read_provenance
from rl_harness.cli import main as cli_main
from rl_harness.harness.runtools.machine import CONSEQUENCE

STAGES = """
import json
from dataclasses import dataclass

from rl_harness import Recipe
from rl_harness.analysis import AnalysisStage, run_stages


@dataclass(frozen=True)
class Budget:
    rows: int
    scale: int


BUDGETS = {"smoke": Budget(1, 1), "cpu": Budget(2, 1)}
DEFAULT_BUDGET = "cpu"


def count(context):
    rows = json.loads((context.results_dir / "data.json").read_text())
    record = {"rows": len(rows), "seed": context.seed, "scale": context.settings.scale}
    (context.results_dir / "count.json").write_text(json.dumps(record))
    return record


def double(context):
    record = json.loads((context.results_dir / "count.json").read_text())
    out = {"twice_rows": 2 * record["rows"] * record["scale"]}
    (context.results_dir / "double.json").write_text(json.dumps(out))
    return out


def audit(context):
    record = {"audited_rows": json.loads((context.results_dir / "count.json").read_text())["rows"]}
    (context.results_dir / "audit.json").write_text(json.dumps(record))
    return record


ANALYSIS_STAGES = (
    AnalysisStage("count", count, reads=("data.json",), checkpoints=False, writes=("count.json",)),
    AnalysisStage(
        "double", double, reads=("count.json",), checkpoints=False, writes=("double.json",)
    ),
    # A costly check: run only when named (--stage audit).
    AnalysisStage(
        "audit", audit, reads=("count.json",), checkpoints=False, writes=("audit.json",),
        on_request=True,
    ),
)
"""

# The stages' leaf: its "training" writes data.json (no Ray), then its analysis runs.
RECIPE = (
    STAGES
    + """

def run(context):
    rows = list(range(context.settings.rows))
    (context.results_dir / "data.json").write_text(json.dumps(rows))
    return dict(run_stages(context, ANALYSIS_STAGES)["double"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)
"""
)

# A real RLlib run whose one stage reads its checkpoints.
RLLIB_RECIPE = """
import json
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import Recipe, run_algorithm
from rl_harness.analysis import AnalysisStage, run_checkpoints, run_stages


@dataclass(frozen=True)
class Budget:
    iterations: int


BUDGETS = {"smoke": Budget(1), "cpu": Budget(2)}
DEFAULT_BUDGET = "cpu"


def iterations(context):
    record = [c.iteration for c in run_checkpoints(context.results_dir)]
    (context.results_dir / "iterations.json").write_text(json.dumps(record))
    return {"checkpoints": record}


ANALYSIS_STAGES = (AnalysisStage("iterations", iterations, reads=("metrics.jsonl",)),)


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=64)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
    )
    run_algorithm(config, context, stop=context.settings.iterations, checkpoint_every=1)
    return dict(run_stages(context, ANALYSIS_STAGES)["iterations"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A study of two leaves (the same recipe); one finished run of `leaf`, seed 3."""
    root = tmp_path_factory.mktemp("analyze_study")
    for name in ("leaf", "other"):
        (root / name).mkdir()
        (root / name / "experiment.py").write_text(textwrap.dedent(RECIPE))
    argv = [str(root / "leaf" / "experiment.py"), "--set", "scale=2", "--seed", "3"]
    code = cli_main([*argv, "--run-id", "done", "--no-upload-artifacts"])
    assert code == 0, (root / "leaf" / "results" / "done" / "error.txt").read_text()
    return root


def analyze(study: Path, *args: str) -> int:
    return cli_main(["analyze", str(study / "leaf" / "experiment.py"), *args])


def test_the_in_run_stages_record_their_provenance(study: Path) -> None:
    run = study / "leaf" / "results" / "done"
    assert json.loads((run / "result.json").read_text()) == {"twice_rows": 8}
    # The run's --set and seed, as the reopened context gives them too.
    assert json.loads((run / "count.json").read_text()) == {"rows": 2, "seed": 3, "scale": 2}
    provenance = read_provenance(run)
    assert list(provenance) == ["count", "double"]
    count = provenance["count"]
    assert list(count["inputs"]) == ["data.json"]
    assert count["inputs"]["data.json"] == hashlib.sha256(b"[0, 1]").hexdigest()
    assert count["library"]["commit"] and count["budget"] == "cpu"
    assert count["overrides"] == {"scale": "2"} and count["settings"]["scale"] == 2
    assert count["writes"] == ["count.json"] and count["seconds"] >= 0
    assert list(provenance["double"]["inputs"]) == ["count.json"]


def test_a_second_call_skips_every_current_stage(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"
    before = (run / "analysis_provenance.json").read_bytes()
    assert analyze(study) == 0  # every completed run of the leaf: this one
    out = capsys.readouterr().out
    assert "stage count: current, skipped" in out and "stage double: current, skipped" in out
    assert (run / "analysis_provenance.json").read_bytes() == before


def test_a_stage_on_request_runs_only_when_named(study: Path, capsys) -> None:
    run = study / "leaf" / "results" / "done"
    assert not (run / "audit.json").exists()  # not in-run (the first test: not in provenance)
    assert analyze(study, "done", "--force") == 0
    assert "audit" not in capsys.readouterr().out
    assert not (run / "audit.json").exists() and "audit" not in read_provenance(run)
    assert analyze(study, "done", "--stage", "audit") == 0
    out = capsys.readouterr().out
    assert "stage audit: running (no provenance recorded)" in out and "stage count" not in out
    rows = json.loads((run / "count.json").read_text())["rows"]
    assert json.loads((run / "audit.json").read_text()) == {"audited_rows": rows}
    assert list(read_provenance(run)["audit"]["inputs"]) == ["count.json"]


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

    (run / "count.json").write_text(json.dumps({"rows": 5, "scale": 1}))  # `double`'s input
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
    assert "unknown stage 'nope'; this leaf declares: count, double, audit (on request)" in error(
        leaf, "--stage", "nope"
    )
    assert "not a run folder nor a run id" in error(leaf, "missing-run")
    other = str(study / "other" / "experiment.py")
    assert "not of" in error(other, str(run))  # a run of another leaf
    assert "no completed run under" in error(other)

    bare = study / "bare"
    bare.mkdir()
    (bare / "experiment.py").write_text("def run(context):\n    return {}\n")
    assert "declares no analysis stages in RECIPE" in error(str(bare / "experiment.py"))


def test_a_run_from_another_machine_is_noted_not_refused(study: Path) -> None:
    """Issue 52 item 1: the run's manifest names another OS build (as the flagship's committed
    runs do here); `rl-harness analyze`, the installed command, says so on one stderr line and
    analyses it; `reopen_run` carries the same line."""
    run = study / "leaf" / "results" / "done"
    path = run / "run_manifest.json"
    original = path.read_text()
    record = json.loads(original)
    here = record["hardware"]["os"]
    other = "Linux-6.18.44-fc-v1272-x86_64-with-glibc2.36"
    assert here != other
    record["hardware"]["os"] = other
    try:
        path.write_text(json.dumps(record))
        command = [str(Path(sys.executable).parent / "rl-harness"), "analyze"]
        done = subprocess.run(
            [*command, str(study / "leaf" / "experiment.py"), "done"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        note = (
            f"rl-harness analyze: note: done: the machine differs (hardware.os: recorded "
            f"{other}, here {here}): {CONSEQUENCE}"
        )
        assert done.stderr.splitlines() == [note]
        assert "stage count: current, skipped" in done.stdout
        assert reopen_run(run).machine == note.removeprefix("rl-harness analyze: note: done: ")
    finally:
        path.write_text(original)
    assert reopen_run(run).machine is None


def test_checkpoints_are_inputs_and_a_run_without_its_artifacts_is_refused(
    tmp_path_factory, ray_session, capsys
) -> None:
    leaf = tmp_path_factory.mktemp("analyze_rllib") / "leaf"
    leaf.mkdir()
    (leaf / "experiment.py").write_text(textwrap.dedent(RLLIB_RECIPE))
    code = cli_main([str(leaf / "experiment.py"), "--run-id", "done", "--no-upload-artifacts"])
    assert code == 0, (leaf / "results" / "done" / "error.txt").read_text()
    run = leaf / "results" / "done"
    assert json.loads((run / "result.json").read_text()) == {"checkpoints": [1, 2]}
    inputs = read_provenance(run)["iterations"]["inputs"]
    assert sorted(inputs) == ["checkpoint/1", "checkpoint/2", "metrics.jsonl"]
    assert all(len(value) == 64 for value in inputs.values())  # sha256 hex of each folder
    target = str(leaf / "experiment.py")
    assert cli_main(["analyze", target]) == 0
    assert "stage iterations: current, skipped" in capsys.readouterr().out

    artifacts = leaf / "artifacts" / "done"
    shutil.move(artifacts, artifacts.with_name("moved"))
    assert cli_main(["analyze", target, "done", "--force"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "artifacts missing" in lines[0]
