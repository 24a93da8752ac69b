"""Checkpoint schedules (step 0, every N, log-spaced by iterations or env steps) in both
runners, recorded in checkpoints.jsonl and read back by `run_checkpoints`. Real CLI runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rl_harness import CheckpointSchedule
from rl_harness.analysis import RunArtifacts, load_module, run_checkpoints
from rl_harness.cli import main
from rl_harness.harness.checkpointing import crossed_log_threshold

DIRECT = """
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import CheckpointSchedule, run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    schedule = CheckpointSchedule(at_start=True, every=3, log_base=2.0)
    return {"iterations": run_algorithm(
        config, context, stop=5, checkpoint_schedule=schedule
    ).iterations}
"""

TUNE = """
from ray import tune
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import CheckpointSchedule, run_tune

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    schedule = CheckpointSchedule(
        at_start=True, every=2, log_base=2.0, log_unit="env_steps", log_first=100
    )
    result = run_tune(
        config, context, stop=3, seeds=[7], param_space={"lr": tune.grid_search([1e-3, 3e-3])},
        checkpoint_schedule=schedule,
    )
    return {"trials": len(result.trials)}
"""


def _run(tmp_path: Path, source: str, run_id: str) -> Path:
    leaf = tmp_path / "study" / "leaf"
    leaf.mkdir(parents=True)
    (leaf / "experiment.py").write_text(textwrap.dedent(source))
    argv = [str(leaf / "experiment.py"), "--run-id", run_id, "--no-upload-artifacts"]
    assert main(argv) == 0, (leaf / "results" / run_id / "error.txt").read_text()
    return leaf / "results" / run_id


def _weights(checkpoint: Path) -> np.ndarray:
    state = load_module(checkpoint).get_state()
    return np.concatenate([np.ravel(v) for _, v in sorted(state.items())])


def test_direct_runner_schedule_records_and_reader(ray_session, tmp_path):
    results = _run(tmp_path, DIRECT, "sched")
    rows = [json.loads(line) for line in (results / "checkpoints.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["env_steps"], r["reasons"]) for r in rows] == [
        (0, 0, ["start"]),
        (1, 64, ["log"]),
        (2, 128, ["log"]),
        (3, 192, ["every"]),
        (4, 256, ["log"]),
        (5, 320, ["final"]),
    ]
    assert rows[0]["path"] == "checkpoints/iter_000000"  # relative to artifacts/<run-id>/

    run = RunArtifacts.open(results)
    found = run_checkpoints(run)
    assert [(c.iteration, c.env_steps) for c in found] == [
        (r["iteration"], r["env_steps"]) for r in rows
    ]
    assert all(c.path == run.artifacts_dir / r["path"] for c, r in zip(found, rows, strict=True))
    assert run_checkpoints(results) == found  # a results folder works as well
    # step 0 is the untrained module: training changed it by the first checkpoint
    assert not np.allclose(_weights(found[0].path), _weights(found[1].path))
    assert run.final_checkpoint() == found[-1].path


def test_schedule_arithmetic():
    # thresholds 100, 200, 400, 800: which (before, now] intervals hold one
    assert crossed_log_threshold(0, 64, base=2, first=100) is False
    assert crossed_log_threshold(64, 128, base=2, first=100) is True
    assert crossed_log_threshold(128, 192, base=2, first=100) is False
    assert crossed_log_threshold(192, 256, base=2, first=100) is True
    assert crossed_log_threshold(256, 1000, base=2, first=100) is True  # several at once
    schedule = CheckpointSchedule(every=4, log_base=10.0)  # iterations 1, 10, 100, ...
    due = [i for i in range(1, 25) if schedule.reasons(
        i, None, previous_iteration=i - 1, previous_env_steps=None
    )]  # fmt: skip
    assert due == [1, 4, 8, 10, 12, 16, 20, 24]
    with pytest.raises(ValueError, match="log_base must be > 1"):
        CheckpointSchedule(log_base=1.0)
    with pytest.raises(ValueError, match="every must be an integer"):
        CheckpointSchedule(every=-1)


@pytest.mark.slow  # a two-trial Tune sweep: about 2 minutes on 2 loaded cores
def test_tune_schedule_per_trial_and_trial_configs(ray_session, tmp_path, capsys):
    results = _run(tmp_path, TUNE, "swept")
    run = RunArtifacts.open(results)
    trials = run.trials()
    assert len(trials) == 2
    summary = json.loads((results / "summary.json").read_text())
    assert sorted(t["config"]["lr"] for t in summary["trials"]) == [1e-3, 3e-3]
    assert {t["config"]["seed"] for t in summary["trials"]} == {7}
    base = json.loads((results / "config.json").read_text())
    assert base["lr"] == {"grid_search": [1e-3, 3e-3]}
    for trial in trials:
        found = run_checkpoints(run, trial=trial.trial_id)
        # 64 steps per iteration: log thresholds 100, 200, ... first crossed at iteration 2
        assert [(c.iteration, c.env_steps, c.reasons) for c in found] == [
            (0, 0, ("start",)),
            (2, 128, ("every", "log")),
            (3, 192, ("final",)),
        ]
        assert found[0].path.name == "initial_checkpoint"
        assert found[0].path.parent == trial.trial_dir
        assert {c.trial_id for c in found} == {trial.trial_id}
        assert found[-1].path == trial.final_checkpoint
    assert len(run_checkpoints(run)) == 6

    capsys.readouterr()
    metric = ["--metric", "env_runners/episode_return_mean", "--json"]
    assert main(["compare", str(results), *metric, "--group-by", "lr"]) == 0
    arms = [arm["arm"] for arm in json.loads(capsys.readouterr().out)["arms"]]
    assert arms == ["leaf [lr=0.001]", "leaf [lr=0.003]"]  # outside a git repo: the leaf folder
