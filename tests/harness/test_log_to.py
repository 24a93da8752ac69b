"""`--log-to tensorboard|mlflow|wandb`: metrics.jsonl rows mirrored through each project's own
client into its real local backend, read back with that project's reader; off by default and
never able to fail a run."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from rl_harness.cli import main as cli_main
from tests.harness.wandb_files import history, run_record

RECIPE = """
from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import run_algorithm


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    return {"iterations": run_algorithm(config, context, stop=2).iterations}
"""
RETURN = "env_runners/episode_return_mean"


def rows(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / "metrics.jsonl").read_text().splitlines()]


def scalar_series(logdir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(logdir))
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def mlflow_runs(store: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"file:{store}")
    return client, client.search_runs(
        [e.experiment_id for e in client.search_experiments()], order_by=["attributes.run_name"]
    )


@pytest.fixture
def file_store(tmp_path, monkeypatch):
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{store}")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return store


def run_leaf(tmp_path: Path, run_id: str, *options: str) -> Path:
    leaf = tmp_path / "leaf"
    leaf.mkdir(exist_ok=True)
    (leaf / "experiment.py").write_text(textwrap.dedent(RECIPE))
    argv = [str(leaf / "experiment.py"), "--run-id", run_id, "--no-upload-artifacts", *options]
    assert cli_main(argv) == 0
    return leaf


def test_direct_runner_mirrors_to_all_three_backends(ray_session, tmp_path, file_store, capsys):
    leaf = run_leaf(
        tmp_path, "mirrored", "--log-to", "tensorboard", "--log-to", "mlflow", "--log-to", "wandb"
    )
    assert "warning: --log-to" not in capsys.readouterr().err  # params logged too, no mirror off
    recorded = rows(leaf / "results" / "mirrored")
    expected = [(r["training_iteration"], r[RETURN]) for r in recorded]
    assert [step for step, _ in expected] == [1, 2]
    artifacts = leaf / "artifacts" / "mirrored"

    # TensorBoard: event files read back with TensorBoard's own EventAccumulator.
    series = scalar_series(artifacts / "tensorboard" / "mirrored", RETURN)
    assert series == [(step, pytest.approx(value, rel=1e-6)) for step, value in expected]

    # MLflow: a finished run in the file store, named by run id, full history per step.
    client, runs = mlflow_runs(file_store)
    (run,) = runs
    assert run.info.run_name == "mirrored" and run.info.status == "FINISHED"
    assert run.data.tags["rl_harness.seed"] == "42"
    history_ = client.get_metric_history(run.info.run_id, RETURN)
    assert sorted((m.step, m.value) for m in history_) == expected

    # W&B: one offline run file whose history rows are the metrics rows.
    (wandb_file,) = (artifacts / "wandb").glob("offline-run-*/run-*.wandb")
    logged = history(wandb_file)
    assert [(row["_step"], row[RETURN]) for row in logged] == expected
    assert run_record(wandb_file).display_name == "mirrored"

    manifest = json.loads((leaf / "results" / "mirrored" / "run_manifest.json").read_text())
    assert manifest["options"]["log_to"] == ["tensorboard", "mlflow", "wandb"]


def test_mirrors_are_off_by_default_and_a_failing_one_never_fails_the_run(
    ray_session, tmp_path, monkeypatch, capsys
):
    leaf = run_leaf(tmp_path, "plain")
    assert sorted(p.name for p in (leaf / "artifacts" / "plain").iterdir()) == ["checkpoints"]

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unknown-scheme://nowhere")
    run_leaf(tmp_path, "broken", "--log-to", "mlflow", "--log-to", "tensorboard")
    err = capsys.readouterr().err
    assert "[broken] warning: --log-to mlflow failed to start" in err
    assert "metrics.jsonl is unaffected" in err
    results = leaf / "results" / "broken"
    assert json.loads((results / "run_manifest.json").read_text())["status"] == "completed"
    recorded = rows(results)
    # The healthy mirror still mirrored everything.
    series = scalar_series(leaf / "artifacts" / "broken" / "tensorboard" / "broken", RETURN)
    assert [step for step, _ in series] == [r["training_iteration"] for r in recorded]


def test_unknown_log_target_is_one_error_line(tmp_path, capsys):
    assert cli_main([str(tmp_path / "x.py"), "--log-to", "neptune"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness: error: ")
    assert "neptune" in err[0]
    assert not os.path.exists(tmp_path / "results")
