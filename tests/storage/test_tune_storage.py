"""Tune's storage on the bucket (moto's real S3 server over HTTP): a 2-seed sweep whose
checkpoints land in the bucket, read back by RunArtifacts and load_module, and continued
with --resume-from s3://..."""

from __future__ import annotations

import json
import textwrap
import uuid

import pytest

from rl_harness.analysis import RunArtifacts, load_module
from rl_harness.cli import main as cli_main
from rl_harness.harness.storage import StorageConfigError
from rl_harness.harness.storage.tune_storage import tune_storage

SWEEP = """
from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import run_tune


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    result = run_tune(config, context, stop=2, seeds=[5, 6], checkpoint_every=1,
                      tune_storage="bucket")
    return {"experiment": str(result.experiment_path)}
"""


@pytest.fixture
def bucket_env(moto_endpoint, raw_s3, monkeypatch):
    bucket = f"rl-{uuid.uuid4().hex[:12]}"
    raw_s3.create_bucket(Bucket=bucket)
    env = {
        "B2_BUCKET": bucket,
        "B2_ENDPOINT": moto_endpoint,
        "B2_APPLICATION_KEY_ID": "tune-key-id",
        "B2_APPLICATION_KEY": "tune-secret-key",
        "B2_PREFIX": "lab/rl",
        "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK": "1",
    }
    monkeypatch.delenv("RL_HARNESS_B2_ENV_FILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _keys(raw_s3, bucket: str) -> list[str]:
    pages = raw_s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


@pytest.mark.slow  # two Tune runs (the sweep, then its restore): a minute or more on 2 cores
def test_sweep_checkpoints_land_in_the_bucket_and_load_back(
    ray_session, bucket_env, raw_s3, tmp_path
):
    leaf = tmp_path / "study" / "sweep"
    leaf.mkdir(parents=True)
    (leaf / "experiment.py").write_text(textwrap.dedent(SWEEP))
    code = cli_main([str(leaf / "experiment.py"), "--run-id", "s1", "--no-upload-artifacts"])
    assert code == 0, (leaf / "results" / "s1" / "error.txt").read_text()

    bucket = bucket_env["B2_BUCKET"]
    summary = json.loads((leaf / "results" / "s1" / "summary.json").read_text())
    base = f"s3://{bucket}/lab/rl/"
    assert summary["experiment_path"].startswith(base)
    assert summary["experiment_path"].endswith("/s1/tune/experiment")
    keys = set(_keys(raw_s3, bucket))
    assert sorted(t["seed"] for t in summary["trials"]) == [5, 6]
    for trial in summary["trials"]:
        assert trial["checkpoint"].startswith(summary["experiment_path"] + "/")
        key = trial["checkpoint"].removeprefix(f"s3://{bucket}/")
        assert f"{key}/rllib_checkpoint.json" in keys  # on the bucket, not a node's disk
    assert not (leaf / "artifacts" / "s1" / "tune").exists()  # nothing Tune kept locally

    run = RunArtifacts.open(leaf / "results" / "s1")
    assert run.is_tune and {t.seed for t in run.trials()} == {5, 6}
    checkpoint = run.final_checkpoint(trial=6)
    assert checkpoint.is_relative_to(leaf / "artifacts" / "s1" / "tune" / "experiment")
    assert checkpoint.name == "checkpoint_000001"
    module = load_module(checkpoint)  # fetched from the bucket, then loaded
    assert module.is_stateful() is False

    # --resume-from an experiment on the bucket restores it there (both trials are done).
    experiment = summary["experiment_path"]
    code = cli_main(
        [
            str(leaf / "experiment.py"),
            "--run-id",
            "s2",
            "--resume-from",
            experiment,
            "--no-upload-artifacts",
        ]
    )
    assert code == 0, (leaf / "results" / "s2" / "error.txt").read_text()
    resumed = json.loads((leaf / "results" / "s2" / "summary.json").read_text())
    assert resumed["experiment_path"] == experiment
    assert sorted(t["checkpoint"] for t in resumed["trials"]) == sorted(
        t["checkpoint"] for t in summary["trials"]
    )


def test_storage_choice(bucket_env, ray_session, tmp_path, monkeypatch):
    where = dict(
        results_dir=tmp_path / "results" / "r",
        experiment_dir=tmp_path / "leaf",
        artifacts_dir=tmp_path / "artifacts" / "r",
        run_id="r",
        local_dir=str(tmp_path / "artifacts" / "r" / "tune"),
    )
    # One node: "auto" keeps Tune on this disk even with B2 configured.
    assert tune_storage("auto", **where)[:2] == (where["local_dir"], None)
    assert tune_storage("local", **where)[:2] == (where["local_dir"], None)
    path, filesystem, uri = tune_storage("bucket", **where)
    assert path == f"{bucket_env['B2_BUCKET']}/lab/rl/leaf/r/tune" and uri == f"s3://{path}"
    assert type(filesystem).__name__ == "S3FileSystem"
    monkeypatch.delenv("B2_BUCKET")
    monkeypatch.delenv("B2_ENDPOINT")
    monkeypatch.delenv("B2_PREFIX")
    with pytest.raises(StorageConfigError, match="tune_storage='bucket' needs B2 configured"):
        tune_storage("bucket", **where)
    with pytest.raises(ValueError, match="tune_storage must be one of"):
        tune_storage("nfs", **where)
