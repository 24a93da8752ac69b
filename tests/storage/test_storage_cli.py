"""`rl-harness upload` / `download`, and full recipe runs through the CLI with B2 configured."""

from __future__ import annotations

import json
from pathlib import Path

from rl_harness.cli import main
from rl_harness.cli.storage import upload_main
from tests.storage.s3_fakes import APP_KEY, KEY_ID, Fault

RUN_ID = "20261202T134500Z-3f9a1c2e"

WRITES_ARTIFACTS = """
def run(context):
    (context.artifacts_dir / "x.bin").write_bytes(b"tiny artifact")
    (context.artifacts_dir / "sub").mkdir()
    (context.artifacts_dir / "sub" / "y.txt").write_text("second file")
    return {"ok": True}
"""

FAILS_MENTIONING_THE_KEY = """
import os

def run(context):
    (context.artifacts_dir / "partial.bin").write_bytes(b"half done")
    raise RuntimeError("could not use key " + os.environ["B2_APPLICATION_KEY"])
"""


def fake_run(tmp_path: Path, local: Path | None = None) -> Path:
    """results/<run-id>/run_manifest.json as the harness writes it, plus two artifacts."""
    leaf = tmp_path / "repo" / "studies" / "leaf"
    results, artifacts = leaf / "results" / RUN_ID, leaf / "artifacts" / RUN_ID
    (artifacts / "ckpt").mkdir(parents=True)
    (artifacts / "a.bin").write_bytes(b"a" * 50)
    (artifacts / "ckpt" / "b.bin").write_bytes(b"b" * 70)
    results.mkdir(parents=True)
    manifest = {
        "run_id": RUN_ID,
        "status": "completed",
        "experiment": {"relative_dir": "studies/leaf", "module": "experiments.x"},
        "seed": 42,
        "artifacts": {"local": str(local or artifacts), "remote": None},
    }
    (results / "run_manifest.json").write_text(json.dumps(manifest))
    return results


def test_upload_main_mirrors_and_updates_the_manifest(b2_env, config, raw_s3, tmp_path):
    results = fake_run(tmp_path)
    assert upload_main([str(results)]) == 0
    manifest = json.loads((results / "run_manifest.json").read_text())
    remote = manifest["artifacts"]["remote"]
    assert remote["status"] == "completed" and remote["uploaded"] == 2
    assert remote["base_uri"] == f"s3://{config.bucket}/lab/rl/studies/leaf/{RUN_ID}/"
    assert manifest["seed"] == 42  # the rest of the manifest is kept
    assert (results / "remote_artifacts.json").is_file()
    key = f"lab/rl/studies/leaf/{RUN_ID}/ckpt/b.bin"
    assert raw_s3.get_object(Bucket=config.bucket, Key=key)["Body"].read() == b"b" * 70


def test_upload_main_finds_artifacts_moved_from_another_host(b2_env, tmp_path):
    results = fake_run(tmp_path, local=Path("/remote/host/path/that/is/gone"))
    assert upload_main([str(results)]) == 0
    manifest = json.loads((results / "run_manifest.json").read_text())
    assert manifest["artifacts"]["remote"]["files"] == 2


def test_upload_main_retries_a_failed_upload_later(b2_env, proxy, tmp_path, capsys):
    results = fake_run(tmp_path)
    proxy.faults.append(Fault("PUT", "b.bin", status=403, code="AccessDenied"))
    assert upload_main([str(results)]) == 1
    manifest = json.loads((results / "run_manifest.json").read_text())
    assert manifest["artifacts"]["remote"]["status"] == "failed"
    assert "AccessDenied" in capsys.readouterr().err

    proxy.faults.clear()
    proxy.seen.clear()
    assert upload_main([str(results)]) == 0
    remote = json.loads((results / "run_manifest.json").read_text())["artifacts"]["remote"]
    assert (remote["status"], remote["uploaded"], remote["skipped"]) == ("completed", 1, 1)
    assert len(proxy.requests("PUT")) == 1


def test_upload_main_usage_errors(b2_env, tmp_path, monkeypatch, capsys):
    assert upload_main([str(tmp_path)]) == 2
    assert "holds no run_manifest.json" in capsys.readouterr().err
    results = fake_run(tmp_path)
    for name in ("B2_BUCKET", "B2_ENDPOINT", "B2_PREFIX"):
        monkeypatch.delenv(name)
    assert upload_main([str(results)]) == 2
    assert "B2 is not configured" in capsys.readouterr().err
    assert upload_main(["--help"]) == 0


def _recipe(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "exp" / "experiment.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def _only_run(leaf: Path) -> tuple[Path, Path]:
    (results,) = (leaf / "results").iterdir()
    return results, leaf / "artifacts" / results.name


def _everything_under(*roots: Path) -> str:
    return "\n".join(
        path.read_bytes().decode("utf-8", "replace")
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
    )


def test_cli_run_mirrors_artifacts_and_download_restores_them(b2_env, config, tmp_path, capsys):
    recipe = _recipe(tmp_path, WRITES_ARTIFACTS)
    assert main([str(recipe), "--run-id", "ok-run"]) == 0
    results, artifacts = _only_run(recipe.parent)
    manifest = json.loads((results / "run_manifest.json").read_text())
    remote = manifest["artifacts"]["remote"]
    assert manifest["status"] == "completed"
    assert (remote["status"], remote["files"]) == ("completed", 2)
    assert remote["base_uri"] == f"s3://{config.bucket}/lab/rl/exp/ok-run/"

    for path in list(artifacts.rglob("*")):
        if path.is_file():
            path.unlink()
    assert main(["download", str(results)]) == 0
    assert (artifacts / "x.bin").read_bytes() == b"tiny artifact"
    assert (artifacts / "sub" / "y.txt").read_text() == "second file"
    captured = capsys.readouterr()
    assert KEY_ID not in captured.out + captured.err
    assert APP_KEY not in captured.out + captured.err


def test_cli_flags_choose_whether_to_upload(b2_env, tmp_path, monkeypatch, capsys):
    recipe = _recipe(tmp_path, WRITES_ARTIFACTS)
    assert main([str(recipe), "--no-upload-artifacts", "--run-id", "local-only"]) == 0
    results, _ = _only_run(recipe.parent)
    assert json.loads((results / "run_manifest.json").read_text())["artifacts"]["remote"] is None
    assert not (results / "remote_artifacts.json").exists()

    for name in b2_env:
        monkeypatch.delenv(name)
    assert main([str(recipe), "--upload-artifacts", "--run-id", "must-upload"]) == 2
    assert "--upload-artifacts needs B2 configured" in capsys.readouterr().err


def test_secrets_absent_from_a_failing_and_a_succeeding_cli_run(b2_env, proxy, tmp_path, capsys):
    # Failing run: the recipe's own error holds the key, and the server echoes the key id.
    failing = _recipe(tmp_path / "a", FAILS_MENTIONING_THE_KEY)
    proxy.faults.append(
        Fault("PUT", "partial.bin", status=403, code="InvalidAccessKeyId", echo_credential=True)
    )
    assert main([str(failing), "--run-id", "bad-run"]) == 1
    failed_results, failed_artifacts = _only_run(failing.parent)
    manifest = json.loads((failed_results / "run_manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["artifacts"]["remote"]["status"] == "failed"
    assert "***REDACTED***" in manifest["artifacts"]["remote"]["error"]
    failing_output = capsys.readouterr()

    # The upload is retried later, successfully, from the same run dir.
    proxy.faults.clear()
    assert main(["upload", str(failed_results)]) == 0
    retry_output = capsys.readouterr()

    succeeding = _recipe(tmp_path / "b", WRITES_ARTIFACTS)
    assert main([str(succeeding), "--run-id", "good-run"]) == 0
    good_results, good_artifacts = _only_run(succeeding.parent)
    good_output = capsys.readouterr()

    written = "\n".join(
        [
            _everything_under(failed_results, failed_artifacts, good_results, good_artifacts),
            *(o.out + o.err for o in (failing_output, retry_output, good_output)),
        ]
    )
    assert "could not use key" in written  # the failure was recorded ...
    assert KEY_ID not in written  # ... without either secret anywhere
    assert APP_KEY not in written
