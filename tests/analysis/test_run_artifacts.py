"""RunArtifacts on a real tiny run made by the CLI (manifest, metrics, summary, checkpoints)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rl_harness.analysis import RunArtifacts


def test_reader_sees_the_whole_run(tiny_run):
    run = RunArtifacts.open(tiny_run.results_dir)
    assert run.run_id == "tiny" and run.status == "completed" and run.seed == 42
    assert run.artifacts_dir == (tiny_run.experiment_dir / "artifacts" / "tiny").resolve()
    assert run.manifest["artifacts"]["local"] == str(run.artifacts_dir)

    rows = run.metrics()
    assert [row["training_iteration"] for row in rows] == [1, 2]
    steps, returns = run.metric("env_runners/episode_return_mean", "num_env_steps_sampled_lifetime")
    assert steps.tolist() == [64.0, 128.0]
    assert np.all((returns >= 0) & (returns <= 16))  # 16-step episodes, reward 0 or 1

    checkpoints = run.checkpoints()
    assert [p.name for p in checkpoints] == ["iter_000001", "iter_000002"]
    assert run.final_checkpoint() == checkpoints[-1]
    assert run.final_checkpoint() == run.artifacts_dir / run.summary["final_checkpoint"]
    with pytest.raises(KeyError, match="no metrics row holds 'nope'"):
        run.metric("nope")


def test_reader_follows_a_run_copied_elsewhere(tiny_run, tmp_path):
    # Copied (e.g. downloaded) runs keep the results/<id> + artifacts/<id> layout, but the
    # manifest's and summary's absolute paths point at the old place.
    leaf = tmp_path / "copied_leaf"
    shutil.copytree(tiny_run.results_dir, leaf / "results" / "tiny")
    shutil.copytree(tiny_run.experiment_dir / "artifacts" / "tiny", leaf / "artifacts" / "tiny")
    manifest_path = leaf / "results" / "tiny" / "run_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["artifacts"]["local"] = "/nowhere/artifacts/tiny"
    manifest_path.write_text(json.dumps(manifest))
    summary_path = leaf / "results" / "tiny" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["final_checkpoint"] = "/nowhere/artifacts/tiny/checkpoints/iter_000002"
    summary_path.write_text(json.dumps(summary))

    run = RunArtifacts.open(leaf / "results" / "tiny")
    assert run.artifacts_dir == (leaf / "artifacts" / "tiny").resolve()
    assert run.final_checkpoint() == run.artifacts_dir / "checkpoints" / "iter_000002"


def test_reader_rejects_what_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run folder"):
        RunArtifacts.open(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        RunArtifacts.open(tmp_path)
    (tmp_path / "summary.json").write_text('{"run_id": "x"}')
    run = RunArtifacts.open(tmp_path)
    assert run.metrics() == [] and run.checkpoints() == []
    with pytest.raises(FileNotFoundError, match="has no checkpoint"):
        run.final_checkpoint()
