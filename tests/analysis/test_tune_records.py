"""Tune-aware records: a real two-seed Tune run made through the CLI, with kept and scored
checkpoints, a stopper and a scheduler passed through; read back with RunArtifacts (also
after the run folders move) and compared per trial by `compare_runs`."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from rl_harness.analysis import RunArtifacts, load_module
from rl_harness.analysis.comparison import compare_runs
from rl_harness.cli import main as cli_main

TUNE_RECIPE = """
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune.result_grid import ResultGrid
from ray.tune.schedulers import FIFOScheduler

from rl_harness import run_tune


class CountingScheduler(FIFOScheduler):
    def __init__(self):
        super().__init__()
        self.results = self.completed = 0

    def on_trial_result(self, tune_controller, trial, result):
        self.results += 1
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result):
        self.completed += 1
        return super().on_trial_complete(tune_controller, trial, result)


def stop_seed_12_early(trial_id, result):
    return result["config"]["seed"] == 12 and result["training_iteration"] >= 2


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    scheduler = CountingScheduler()
    result = run_tune(
        config,
        context,
        stop=3,
        seeds=[11, 12],
        checkpoint_every=1,
        num_to_keep=2,
        checkpoint_score_attribute="training_iteration",
        stopper=stop_seed_12_early,
        scheduler=scheduler,
    )
    return {
        "grid": isinstance(result.result_grid, ResultGrid) and len(result.result_grid),
        "scheduler": [scheduler.results, scheduler.completed],
        "trials": {
            str(t.seed): {
                "checkpoints": [p.name for p in t.checkpoints],
                "best": t.best_checkpoint.name if t.best_checkpoint else None,
                "last": t.checkpoint_path.name,
            }
            for t in result.trials
        },
    }
"""


@pytest.fixture(scope="module")
def tune_run(ray_session, tmp_path_factory):
    """The sweep, also mirrored with --log-to to all three backends (MLflow: a file store)."""
    leaf = tmp_path_factory.mktemp("tune_study") / "sweep"
    leaf.mkdir()
    (leaf / "experiment.py").write_text(textwrap.dedent(TUNE_RECIPE))
    env = {"MLFLOW_TRACKING_URI": f"file:{leaf / 'mlruns'}", "MLFLOW_ALLOW_FILE_STORE": "true"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        code = cli_main(
            [str(leaf / "experiment.py"), "--run-id", "sweep", "--no-upload-artifacts"]
            + ["--log-to", "tensorboard", "--log-to", "mlflow", "--log-to", "wandb"]
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert code == 0, (leaf / "results" / "sweep" / "error.txt").read_text()
    return leaf, leaf / "results" / "sweep"


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_run_tune_passes_tune_options_through(tune_run):
    _, results = tune_run
    result = _json(results / "result.json")
    assert result["grid"] == 2  # run_tune returned Tune's ResultGrid of both trials
    summary = _json(results / "summary.json")
    assert summary["status"] == "completed"
    by_seed = {t["seed"]: t for t in summary["trials"]}
    # The stopper ended seed 12 after 2 iterations: completed, not mistaken for Ctrl-C.
    assert by_seed[11]["iterations"] == 3 and by_seed[12]["iterations"] == 2
    assert {t["status"] for t in summary["trials"]} == {"completed"}
    # 5 results in all; Tune hands a trial's stopping result to on_trial_complete instead.
    assert result["scheduler"] == [3, 2]
    # num_to_keep=2 by training_iteration: the last two checkpoints, the newest the best.
    kept = result["trials"]["11"]
    assert kept["checkpoints"] == ["checkpoint_000001", "checkpoint_000002"]
    assert kept["best"] == kept["last"] == "checkpoint_000002"


def test_run_artifacts_lists_trials_and_finds_their_checkpoints(tune_run):
    _, results = tune_run
    run = RunArtifacts.open(results)
    summary = _json(results / "summary.json")
    assert summary["experiment_path"] == "tune/experiment"  # relative to artifacts/<run-id>/
    assert run.is_tune and run.experiment_dir == run.artifacts_dir / summary["experiment_path"]
    trials = {t.seed: t for t in run.trials()}
    assert sorted(trials) == [11, 12]
    for record in summary["trials"]:
        trial = trials[record["seed"]]
        assert trial.trial_id == record["trial_id"] and trial.status == "completed"
        assert [row["training_iteration"] for row in trial.metrics] == list(
            range(1, record["iterations"] + 1)
        )
        assert {row["seed"] for row in trial.metrics} == {record["seed"]}
        recorded = run.artifacts_dir / record["checkpoint"]
        assert trial.final_checkpoint == recorded
        assert run.final_checkpoint(trial=record["trial_id"]) == recorded
        assert run.final_checkpoint(trial=record["seed"]) == recorded
        assert [run.artifacts_dir / p for p in record["checkpoints"]] == trial.checkpoints
    with pytest.raises(ValueError, match="has 2 trials .*pass final_checkpoint\\(trial="):
        run.final_checkpoint()
    with pytest.raises(KeyError, match="no trial 'nope' in Tune run .*seed 11"):
        run.final_checkpoint(trial="nope")
    module = load_module(run.final_checkpoint(trial=11))  # a trial's checkpoint loads
    assert module.is_stateful() is False


def test_tune_records_follow_the_run_when_moved(tune_run, tmp_path: Path):
    leaf, results = tune_run
    moved = tmp_path / "copied"
    shutil.copytree(leaf, moved)
    # The records' absolute paths still point at the original: move it out of the way.
    shutil.move(leaf / "artifacts", tmp_path / "aside")
    try:
        run = RunArtifacts.open(moved / "results" / "sweep")
        path = run.final_checkpoint(trial=12)
        assert path.is_relative_to(moved) and path.name == "checkpoint_000001"
        assert {t.seed for t in run.trials()} == {11, 12}
    finally:
        shutil.move(tmp_path / "aside", leaf / "artifacts")


def test_records_with_absolute_paths_still_resolve_when_moved(tune_run, tmp_path: Path):
    """A summary written before checkpoint paths were relative held absolute ones: a run
    recorded so, then copied elsewhere, still finds its experiment and checkpoints."""
    leaf, _ = tune_run
    moved = tmp_path / "copied"
    shutil.copytree(leaf, moved)
    summary_path = moved / "results" / "sweep" / "summary.json"
    summary = _json(summary_path)
    old_artifacts = (leaf / "artifacts" / "sweep").resolve()

    def absolute(path: str | None) -> str | None:
        return str(old_artifacts / path) if path else path

    summary["experiment_path"] = absolute(summary["experiment_path"])
    for trial in summary["trials"]:
        trial["checkpoint"] = absolute(trial["checkpoint"])
        trial["checkpoints"] = [absolute(p) for p in trial["checkpoints"]]
        trial["best_checkpoint"] = absolute(trial["best_checkpoint"])
    summary_path.write_text(json.dumps(summary))
    shutil.move(leaf / "artifacts", tmp_path / "aside")
    try:
        run = RunArtifacts.open(moved / "results" / "sweep")
        artifacts = (moved / "artifacts" / "sweep").resolve()
        assert run.experiment_dir == artifacts / "tune" / "experiment"
        for recorded in summary["trials"]:
            trial = run.trial(recorded["seed"])
            assert trial.final_checkpoint == trial.trial_dir / Path(recorded["checkpoint"]).name
            assert trial.final_checkpoint.is_relative_to(artifacts)
            best = Path(recorded["best_checkpoint"]).name
            assert trial.best_checkpoint == trial.trial_dir / best
    finally:
        shutil.move(tmp_path / "aside", leaf / "artifacts")


def test_compare_counts_each_trial_as_a_run(tune_run):
    leaf, results = tune_run
    comparison = compare_runs([leaf], ["env_runners/episode_return_mean", "return_per_step"])
    (arm,) = comparison.arms
    assert arm.n_runs == 2 and sorted(arm.seeds) == [11, 12]
    finals = [t["final_metrics"] for t in _json(results / "summary.json")["trials"]]
    returns = arm.metrics["env_runners/episode_return_mean"].values
    assert sorted(returns) == sorted(f["env_runners/episode_return_mean"] for f in finals)
    per_step = [
        f["env_runners/episode_return_mean"] / f["env_runners/episode_len_mean"] for f in finals
    ]
    assert sorted(arm.metrics["return_per_step"].values) == sorted(per_step)


def test_log_to_mirrors_each_trial(tune_run):
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.harness.wandb_files import history, run_record

    leaf, results = tune_run
    key = "env_runners/episode_return_mean"
    rows = [json.loads(line) for line in (results / "metrics.jsonl").read_text().splitlines()]
    trials = {t["trial_id"]: t for t in _json(results / "summary.json")["trials"]}
    expected = {
        trial_id: [(r["training_iteration"], r[key]) for r in rows if r["trial_id"] == trial_id]
        for trial_id in trials
    }
    artifacts = leaf / "artifacts" / "sweep"
    client = MlflowClient(tracking_uri=f"file:{leaf / 'mlruns'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    mlflow_runs = {run.info.run_name: run for run in runs}
    wandb_runs = {}
    for path in (artifacts / "wandb").glob("offline-run-*/run-*.wandb"):
        wandb_runs[run_record(path).display_name] = history(path)
    for trial_id, series in expected.items():
        name = f"sweep/{trial_id}"
        accumulator = EventAccumulator(str(artifacts / "tensorboard" / f"sweep_{trial_id}"))
        accumulator.Reload()
        got = [(e.step, e.value) for e in accumulator.Scalars(key)]
        assert got == [(step, pytest.approx(value, rel=1e-6)) for step, value in series]
        run = mlflow_runs[name]
        assert run.info.status == "FINISHED"
        assert run.data.tags["rl_harness.seed"] == str(trials[trial_id]["seed"])
        logged = client.get_metric_history(run.info.run_id, key)
        assert sorted((m.step, m.value) for m in logged) == series
        assert [(row["_step"], row[key]) for row in wandb_runs[name]] == series
    assert len(mlflow_runs) == len(wandb_runs) == 2
