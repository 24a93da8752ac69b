"""The library behind `rl-harness upload` and `download` (harness/storage), called directly:
what a run folder's upload is, the manifest rewritten redacted of the config's keys, and
what a download target means. Real HTTP to the local S3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_harness.harness.redaction import REDACTED
from rl_harness.harness.storage import (
    NothingToDownload,
    RunUploadError,
    StorageConfigError,
    plan_download,
    plan_run_upload,
    required_b2_config,
    upload_run,
)
from tests.storage.s3_fakes import APP_KEY, KEY_ID
from tests.storage.test_storage_cli import RUN_ID, fake_run


def _manifest(results: Path) -> dict:
    return json.loads((results / "run_manifest.json").read_text())


def _rewrite(results: Path, **changes) -> None:
    manifest = _manifest(results)
    manifest.update(changes)
    (results / "run_manifest.json").write_text(json.dumps(manifest))


def test_plan_run_upload_reads_the_manifest(tmp_path):
    results = fake_run(tmp_path)
    upload = plan_run_upload(results)
    assert upload.results_dir == results.resolve()
    assert upload.artifacts_dir == results.parent.parent / "artifacts" / RUN_ID
    assert upload.remote_run_path == f"studies/leaf/{RUN_ID}"
    assert upload.still_running is False
    _rewrite(results, status="running")
    assert plan_run_upload(results).still_running is True


def test_plan_run_upload_finds_artifacts_moved_from_another_host(tmp_path):
    results = fake_run(tmp_path, local=Path("/remote/host/path/that/is/gone"))
    expected = (results.parent.parent / "artifacts" / RUN_ID).resolve()
    assert plan_run_upload(results).artifacts_dir.resolve() == expected


def test_plan_run_upload_refuses_what_is_no_run(tmp_path):
    with pytest.raises(RunUploadError, match="holds no run_manifest.json; pass results/"):
        plan_run_upload(tmp_path)
    results = fake_run(tmp_path)
    manifest = _manifest(results)
    del manifest["experiment"]
    (results / "run_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunUploadError, match="run_manifest.json lacks 'experiment'"):
        plan_run_upload(results)


def test_upload_run_records_the_summary_redacted_of_the_configs_keys(config, tmp_path):
    """The keys are in no environment variable here (as when read from an env file): only
    the config's own secrets keep them out of the rewritten manifest."""
    results = fake_run(tmp_path)
    _rewrite(results, notes=f"keys {KEY_ID} {APP_KEY}")  # a leak from before, or by hand
    summary = upload_run(config, plan_run_upload(results))
    assert summary["status"] == "completed" and summary["uploaded"] == 2
    text = (results / "run_manifest.json").read_text()
    assert KEY_ID not in text and APP_KEY not in text
    manifest = json.loads(text)
    assert manifest["notes"] == f"keys {REDACTED} {REDACTED}"
    assert manifest["artifacts"]["remote"]["base_uri"] == summary["base_uri"]
    assert manifest["seed"] == 42  # the rest of the manifest is kept


def test_plan_download_targets_and_default_destinations(config, tmp_path, monkeypatch):
    results = fake_run(tmp_path)
    upload_run(config, plan_run_upload(results))
    by_index = plan_download(config, str(results))
    assert by_index.dest == (results.parent.parent / "artifacts" / RUN_ID).resolve()
    assert sorted(w.path for w in by_index.wanted) == ["a.bin", "ckpt/b.bin"]
    assert by_index.problems == [] and by_index.client is None
    uri = f"s3://{config.bucket}/lab/rl/studies/leaf/{RUN_ID}/"
    by_uri = plan_download(config, uri)
    assert by_uri.dest == Path(RUN_ID) and by_uri.client is not None
    assert sorted(w.path for w in by_uri.wanted) == ["a.bin", "ckpt/b.bin"]
    assert plan_download(config, uri, tmp_path / "here").dest == tmp_path / "here"
    with pytest.raises(NothingToDownload, match="nothing found under s3://"):
        plan_download(config, f"s3://{config.bucket}/nothing/here/")
    with pytest.raises(FileNotFoundError, match="never mirrored"):
        plan_download(config, str(tmp_path))


def test_required_b2_config_names_what_to_set(b2_env, monkeypatch):
    assert required_b2_config().bucket == b2_env["B2_BUCKET"]
    for name in ("B2_BUCKET", "B2_ENDPOINT", "B2_PREFIX"):
        monkeypatch.delenv(name)
    with pytest.raises(StorageConfigError, match="B2 is not configured: set B2_BUCKET"):
        required_b2_config()
