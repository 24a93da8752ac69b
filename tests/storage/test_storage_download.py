"""Downloads verify every sha256; corrupted or unverifiable objects are reported, not kept."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from rl_harness.cli.storage import download_main
from rl_harness.harness.storage import download_files, mirror_run_artifacts
from rl_harness.harness.storage.download import wanted_from_index

RUN_ID = "20261202T134500Z-3f9a1c2e"
BASE_KEY = f"lab/rl/studies/ppo/{RUN_ID}"


@pytest.fixture
def mirrored(config, tmp_path):
    """A leaf with artifacts/<run-id>/ mirrored and results/<run-id>/remote_artifacts.json."""
    artifacts = tmp_path / "leaf" / "artifacts" / RUN_ID
    results = tmp_path / "leaf" / "results" / RUN_ID
    files = {
        "x.bin": os.urandom(4000),
        "ckpt/iter_2/state.pt": os.urandom(9000),
        "ckpt/iter_2/empty": b"",
    }
    for rel, data in files.items():
        (artifacts / rel).parent.mkdir(parents=True, exist_ok=True)
        (artifacts / rel).write_bytes(data)
    summary = mirror_run_artifacts(
        config,
        artifacts_dir=artifacts,
        results_dir=results,
        remote_run_path=f"studies/ppo/{RUN_ID}",
        log=lambda _line: None,
    )
    assert summary["status"] == "completed", summary["error"]
    return results, files


def read_tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_download_by_index_verifies_and_is_idempotent(config, mirrored, tmp_path):
    results, files = mirrored
    wanted, problems = wanted_from_index(results)
    assert problems == []
    report = download_files(config, wanted, tmp_path / "dest", log=lambda _line: None)
    assert report.ok and sorted(report.downloaded) == sorted(files)
    assert read_tree(tmp_path / "dest") == files
    umask = os.umask(0)
    os.umask(umask)
    modes = {(p.stat().st_mode & 0o777) for p in (tmp_path / "dest").rglob("*") if p.is_file()}
    assert modes == {0o666 & ~umask}  # readable by teammates like every record, not 0600

    again = download_files(config, wanted, tmp_path / "dest", log=lambda _line: None)
    assert again.ok and again.downloaded == [] and sorted(again.already_present) == sorted(files)


def test_download_main_restores_the_artifacts_dir_by_default(b2_env, mirrored, capsys):
    results, files = mirrored
    artifacts = results.parent.parent / "artifacts" / RUN_ID
    for path in artifacts.rglob("*"):
        if path.is_file():
            path.unlink()
    assert download_main([str(results)]) == 0
    assert read_tree(artifacts) == files
    assert "3 downloaded" in capsys.readouterr().out


def test_corrupted_object_is_detected_via_the_index(
    b2_env, config, raw_s3, mirrored, tmp_path, capsys
):
    results, files = mirrored
    key = f"{BASE_KEY}/ckpt/iter_2/state.pt"
    original_sha = hashlib.sha256(files["ckpt/iter_2/state.pt"]).hexdigest()
    # Same size, same (now false) sha256 metadata, different bytes.
    tampered = bytes(b ^ 1 for b in files["ckpt/iter_2/state.pt"])
    raw_s3.put_object(
        Bucket=config.bucket, Key=key, Body=tampered, Metadata={"sha256": original_sha}
    )

    dest = tmp_path / "dest"
    assert download_main([str(results), "--dest", str(dest)]) == 1
    err = capsys.readouterr().err
    assert "ckpt/iter_2/state.pt" in err and "corrupted object" in err
    assert not (dest / "ckpt/iter_2/state.pt").exists()  # never lands in place
    assert (dest / "x.bin").read_bytes() == files["x.bin"]  # the good ones still do
    assert not list(dest.rglob("*.part"))  # no temp files left behind


def test_corruption_message_names_file_and_hash(b2_env, config, raw_s3, mirrored, tmp_path, capsys):
    results, files = mirrored
    raw_s3.put_object(Bucket=config.bucket, Key=f"{BASE_KEY}/x.bin", Body=b"short")
    assert download_main([str(results), "--dest", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "x.bin" in err and "size 5 != recorded 4000" in err


def test_download_by_uri_checks_object_metadata(b2_env, config, raw_s3, mirrored, tmp_path, capsys):
    _, files = mirrored
    uri = f"s3://{config.bucket}/{BASE_KEY}/"
    assert download_main([uri, "--dest", str(tmp_path / "by_uri")]) == 0
    assert read_tree(tmp_path / "by_uri") == files

    single = tmp_path / "single"
    assert download_main([f"s3://{config.bucket}/{BASE_KEY}/x.bin", "--dest", str(single)]) == 0
    assert (single / "x.bin").read_bytes() == files["x.bin"]

    original_sha = hashlib.sha256(files["x.bin"]).hexdigest()
    raw_s3.put_object(
        Bucket=config.bucket,
        Key=f"{BASE_KEY}/x.bin",
        Body=os.urandom(4000),
        Metadata={"sha256": original_sha},
    )
    capsys.readouterr()
    assert download_main([uri, "--dest", str(tmp_path / "again")]) == 1
    err = capsys.readouterr().err
    assert "x.bin" in err and "corrupted object" in err


def test_objects_without_our_hash_cannot_be_verified(b2_env, config, raw_s3, tmp_path, capsys):
    raw_s3.put_object(Bucket=config.bucket, Key="foreign/run/a.txt", Body=b"hello")
    uri = f"s3://{config.bucket}/foreign/run"
    assert download_main([uri, "--dest", str(tmp_path / "d")]) == 1
    assert "no sha256 metadata" in capsys.readouterr().err
    assert not (tmp_path / "d" / "a.txt").exists()


def test_files_that_never_uploaded_are_reported(b2_env, mirrored, tmp_path, capsys):
    results, _ = mirrored
    index_path = results / "remote_artifacts.json"
    index = json.loads(index_path.read_text())
    index["files"][0].update(status="failed", sha256=None, error="interrupted")
    index_path.write_text(json.dumps(index))
    assert download_main([str(results), "--dest", str(tmp_path / "d")]) == 1
    assert "never uploaded (interrupted)" in capsys.readouterr().err


def test_download_usage_errors(b2_env, tmp_path, monkeypatch, capsys):
    assert download_main([str(tmp_path)]) == 2
    assert "never mirrored" in capsys.readouterr().err
    monkeypatch.delenv("B2_BUCKET")
    monkeypatch.delenv("B2_ENDPOINT")
    monkeypatch.delenv("B2_PREFIX")
    assert download_main([str(tmp_path)]) == 2
    assert "B2 is not configured" in capsys.readouterr().err
