"""Tune-aware records: a real two-seed Tune run with kept/scored checkpoints, a stopper and a
scheduler passed through, read back with RunArtifacts (also after the run folders move)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ray.tune.result_grid import ResultGrid
from ray.tune.schedulers import FIFOScheduler

from rl_harness.analysis import RunArtifacts, load_module
from rl_harness.harness.context import make_context
from rl_harness.harness.runners import run_tune

SCORE = "env_runners/episode_return_mean"


def tiny_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )


class CountingScheduler(FIFOScheduler):
    """Tune's FIFO scheduler, counting the results it was shown."""

    def __init__(self) -> None:
        super().__init__()
        self.results = 0
        self.completed = 0

    def on_trial_result(self, tune_controller, trial, result):
        self.results += 1
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result):
        self.completed += 1
        return super().on_trial_complete(tune_controller, trial, result)


def stop_seed_12_early(trial_id: str, result: dict) -> bool:
    return result["config"]["seed"] == 12 and result["training_iteration"] >= 2


@pytest.fixture(scope="module")
def tune_run(ray_session, tmp_path_factory):
    leaf = tmp_path_factory.mktemp("tune_leaf")
    context = make_context(leaf, seed=3)
    scheduler = CountingScheduler()
    result = run_tune(
        tiny_config(),
        context,
        stop=3,
        seeds=[11, 12],
        checkpoint_every=1,
        num_to_keep=2,
        checkpoint_score_attribute="training_iteration",
        stopper=stop_seed_12_early,
        scheduler=scheduler,
    )
    return leaf, context, result, scheduler


def test_run_tune_passes_tune_options_through(tune_run):
    _, _, result, scheduler = tune_run
    assert isinstance(result.result_grid, ResultGrid) and len(result.result_grid) == 2
    by_seed = {t.seed: t for t in result.trials}
    # The stopper ended seed 12 after 2 iterations: completed, not mistaken for Ctrl-C.
    assert by_seed[11].iterations == 3 and by_seed[12].iterations == 2
    assert all(t.status == "completed" for t in result.trials)
    # 5 results in all; Tune hands a trial's stopping result to on_trial_complete instead.
    assert scheduler.results == 3 and scheduler.completed == 2
    # num_to_keep=2 by training_iteration: the last two checkpoints, the newest the best.
    assert [p.name for p in by_seed[11].checkpoints] == ["checkpoint_000001", "checkpoint_000002"]
    assert by_seed[11].best_checkpoint == by_seed[11].checkpoint_path == by_seed[11].checkpoints[-1]


def test_run_artifacts_lists_trials_and_finds_their_checkpoints(tune_run):
    _, context, result, _ = tune_run
    run = RunArtifacts.open(context.results_dir)
    assert run.is_tune and run.experiment_dir == result.experiment_path
    trials = {t.seed: t for t in run.trials()}
    assert sorted(trials) == [11, 12]
    for record in result.trials:
        trial = trials[record.seed]
        assert trial.trial_id == record.trial_id and trial.status == "completed"
        assert [row["training_iteration"] for row in trial.metrics] == list(
            range(1, record.iterations + 1)
        )
        assert {row["seed"] for row in trial.metrics} == {record.seed}
        assert trial.final_checkpoint == record.checkpoint_path
        assert run.final_checkpoint(trial=record.trial_id) == record.checkpoint_path
        assert run.final_checkpoint(trial=record.seed) == record.checkpoint_path
        assert trial.checkpoints == record.checkpoints
    with pytest.raises(ValueError, match="has 2 trials .*pass final_checkpoint\\(trial="):
        run.final_checkpoint()
    with pytest.raises(KeyError, match="no trial 'nope' in Tune run .*seed 11"):
        run.final_checkpoint(trial="nope")
    # A trial's checkpoint loads as a module.
    module = load_module(run.final_checkpoint(trial=11))
    assert module.is_stateful() is False


def test_tune_records_follow_the_run_when_moved(tune_run, tmp_path: Path):
    leaf, context, result, _ = tune_run
    moved = tmp_path / "copied_leaf"
    shutil.copytree(leaf, moved)
    run = RunArtifacts.open(moved / "results" / context.run_id)
    # The summary's absolute paths still point at the original; move it out of the way.
    shutil.rmtree(leaf / "artifacts")
    try:
        path = run.final_checkpoint(trial=12)
        assert path.is_relative_to(moved) and path.name == result.trials[1].checkpoint_path.name
        assert {t.seed for t in run.trials()} == {11, 12}
    finally:
        shutil.copytree(moved / "artifacts", leaf / "artifacts")
