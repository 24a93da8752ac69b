"""Reopen a finished run (issue 48 item 1): a real run made through the CLI with a budget by
name, a --set override and a seed comes back as the RunContext it ran with, with its
checkpoints; changed code is refused naming what differs, unless allowed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rl_harness.analysis.reopen import ReopenError, reopen_run
from rl_harness.cli import main as cli_main

RECIPE = """
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import run_algorithm


@dataclass(frozen=True)
class Budget:
    iterations: int
    batch: int


BUDGETS = {"smoke": Budget(1, 64), "cpu": Budget(3, 128)}
DEFAULT_BUDGET = "cpu"


def run(context):
    plan = context.settings
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=plan.batch)
        .training(train_batch_size_per_learner=plan.batch, minibatch_size=32, num_epochs=1)
    )
    result = run_algorithm(config, context, stop=plan.iterations, checkpoint_every=1)
    return {"iterations": result.iterations}
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory, ray_session) -> Path:
    leaf = tmp_path_factory.mktemp("reopen_study") / "leaf"
    leaf.mkdir()
    (leaf / "experiment.py").write_text(textwrap.dedent(RECIPE))
    argv = [str(leaf / "experiment.py"), "--budget", "cpu", "--set", "iterations=1"]
    code = cli_main([*argv, "--seed", "7", "--run-id", "done", "--no-upload-artifacts"])
    assert code == 0, (leaf / "results" / "done" / "error.txt").read_text()
    return leaf / "results" / "done"


def test_a_finished_run_comes_back_as_it_ran(finished: Path) -> None:
    reopened = reopen_run(finished)
    context = reopened.context
    assert (context.run_id, context.seed, context.budget) == ("done", 7, "cpu")
    assert context.settings.iterations == 1 and context.settings.batch == 128  # --set kept
    assert context.overrides == {"iterations": 1}
    assert context.options.overrides == ("iterations=1",)
    assert context.results_dir == finished.resolve()
    assert context.artifacts_dir == (finished.parent.parent / "artifacts" / "done").resolve()
    assert reopened.differences == ()
    assert [c.iteration for c in reopened.checkpoints] == [1]
    assert reopened.final_checkpoint is not None
    assert Path(reopened.final_checkpoint.path).is_dir()


def test_changed_code_is_refused_naming_what_differs(finished: Path) -> None:
    source = finished.parent.parent / "experiment.py"
    original = source.read_text()
    try:
        source.write_text(original + "\n# an edit after the run\n")
        with pytest.raises(ReopenError, match="experiment source experiment.py differs"):
            reopen_run(finished)
        reopened = reopen_run(finished, allow_changes=True)
        assert any("experiment.py" in line for line in reopened.differences)
    finally:
        source.write_text(original)


def test_a_budget_that_now_resolves_otherwise_is_named(finished: Path) -> None:
    manifest_path = finished / "run_manifest.json"
    original = manifest_path.read_text()
    try:
        manifest = json.loads(original)
        manifest["budget"]["settings"]["batch"] = 256  # as if the recipe's cpu batch changed
        manifest_path.write_text(json.dumps(manifest))
        with pytest.raises(ReopenError, match="other settings than recorded: batch"):
            reopen_run(finished)
    finally:
        manifest_path.write_text(original)


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(ReopenError, match="no run_manifest.json"):
        reopen_run(tmp_path)
