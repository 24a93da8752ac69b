"""mirror_run_artifacts over real HTTP against moto: upload, resume, idempotence, retries."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from rl_harness.harness.storage import download_files, mirror_run_artifacts
from rl_harness.harness.storage.download import wanted_from_index
from tests.storage.s3_fakes import APP_KEY, KEY_ID, Fault

RUN_PATH = "studies/mess3/ppo/20261202T134500Z-3f9a1c2e"
BASE_KEY = f"lab/rl/{RUN_PATH}"


def make_tree(root):
    files = {
        "x.bin": os.urandom(3000),
        "checkpoints/iter_1/state.pt": os.urandom(20_000),
        "checkpoints/iter_1/meta.json": b'{"iteration": 1}',
        "plots/empty.txt": b"",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def mirror(config, tmp_path, logs=None):
    return mirror_run_artifacts(
        config,
        artifacts_dir=tmp_path / "artifacts",
        results_dir=tmp_path / "results",
        remote_run_path=RUN_PATH,
        log=(logs.append if logs is not None else lambda _line: None),
    )


def test_upload_records_uris_sizes_hashes_and_metadata(config, proxy, raw_s3, tmp_path):
    files = make_tree(tmp_path / "artifacts")
    summary = mirror(config, tmp_path)

    assert summary["status"] == "completed", summary["error"]
    assert summary["base_uri"] == f"s3://{config.bucket}/{BASE_KEY}/"
    assert (summary["files"], summary["uploaded"], summary["skipped"]) == (4, 4, 0)
    assert summary["bytes"] == sum(len(d) for d in files.values())
    assert summary["backend"] == "b2" and summary["bucket"] == config.bucket

    index = json.loads((tmp_path / "results" / "remote_artifacts.json").read_text())
    assert index["base_uri"] == summary["base_uri"]
    by_path = {entry["path"]: entry for entry in index["files"]}
    assert set(by_path) == set(files)
    for rel, data in files.items():
        entry = by_path[rel]
        key = f"{BASE_KEY}/{rel}"
        assert entry["uri"] == f"s3://{config.bucket}/{key}"
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        obj = raw_s3.get_object(Bucket=config.bucket, Key=key)
        assert obj["Body"].read() == data
        assert obj["Metadata"]["sha256"] == entry["sha256"]

    # What B2 would reject: boto3's default flexible checksums and aws-chunked bodies.
    puts = proxy.requests("PUT")
    assert len(puts) == 4
    for request in puts:
        names = {name.lower() for name in request.headers}
        assert not any(name.startswith("x-amz-checksum") for name in names), names
        assert "x-amz-sdk-checksum-algorithm" not in names
        assert "aws-chunked" not in request.headers.get("Content-Encoding", "")


def test_second_upload_sends_nothing_and_a_changed_file_is_replaced(config, proxy, tmp_path):
    make_tree(tmp_path / "artifacts")
    assert mirror(config, tmp_path)["uploaded"] == 4
    proxy.seen.clear()

    again = mirror(config, tmp_path)
    assert again["status"] == "completed"
    assert (again["uploaded"], again["skipped"], again["bytes_uploaded"]) == (0, 4, 0)
    assert proxy.requests("PUT") == []

    (tmp_path / "artifacts" / "x.bin").write_bytes(b"new content")
    third = mirror(config, tmp_path)
    assert (third["uploaded"], third["skipped"]) == (1, 3)
    assert [r.path for r in proxy.requests("PUT")] == [f"/{config.bucket}/{BASE_KEY}/x.bin"]


def test_failure_mid_way_is_recorded_then_resumed(config, proxy, raw_s3, tmp_path):
    files = make_tree(tmp_path / "artifacts")
    proxy.faults.append(Fault("PUT", "state.pt"))  # fails on every attempt
    logs: list[str] = []
    first = mirror(config, tmp_path, logs)

    assert first["status"] == "failed"
    assert (first["uploaded"], first["failed"]) == (3, 1)
    assert "checkpoints/iter_1/state.pt" in first["error"]
    assert "rl-harness upload" in first["error"]
    assert any("upload failed: checkpoints/iter_1/state.pt" in line for line in logs)
    index = json.loads((tmp_path / "results" / "remote_artifacts.json").read_text())
    statuses = {entry["path"]: entry["status"] for entry in index["files"]}
    assert statuses["checkpoints/iter_1/state.pt"] == "failed"
    assert index["status"] == "failed"
    # botocore's standard retry mode is the only layer: max_attempts (3) requests, no more.
    assert len(proxy.requests("PUT", "state.pt")) == config.max_attempts

    proxy.faults.clear()
    proxy.seen.clear()
    second = mirror(config, tmp_path)
    assert second["status"] == "completed", second["error"]
    assert (second["uploaded"], second["skipped"], second["failed"]) == (1, 3, 0)
    assert [r.path for r in proxy.requests("PUT")] == [
        f"/{config.bucket}/{BASE_KEY}/checkpoints/iter_1/state.pt"
    ]
    key = f"{BASE_KEY}/checkpoints/iter_1/state.pt"
    assert (
        raw_s3.get_object(Bucket=config.bucket, Key=key)["Body"].read()
        == files["checkpoints/iter_1/state.pt"]
    )


def test_transient_errors_are_retried_until_they_pass(config, proxy, tmp_path):
    make_tree(tmp_path / "artifacts")
    # Two 503s: botocore's third attempt gets through (max_attempts=3).
    proxy.faults.append(Fault("PUT", "x.bin", times=2))
    proxy.faults.append(Fault("HEAD", "meta.json", times=1, status=500, code="InternalError"))
    proxy.faults.append(Fault("PUT", "partNumber=2", times=2, status=500, code="InternalError"))
    (tmp_path / "artifacts" / "big.pt").write_bytes(os.urandom(11 * 1024 * 1024))
    summary = mirror(config, tmp_path)
    assert summary["status"] == "completed", summary["error"]
    assert summary["uploaded"] == 5
    assert len(proxy.requests("PUT", "x.bin")) == 3
    # A failing part is retried on its own: one multipart upload, parts 1 and 3 sent once.
    assert len(proxy.requests("POST", "big.pt?uploads")) == 1
    assert len(proxy.requests("PUT", "partNumber=1")) == 1
    assert len(proxy.requests("PUT", "partNumber=2")) == 3
    assert len(proxy.requests("PUT", "partNumber=3")) == 1


def test_permanent_errors_are_not_retried(config, proxy, tmp_path):
    make_tree(tmp_path / "artifacts")
    proxy.faults.append(Fault("PUT", "x.bin", status=403, code="AccessDenied"))
    summary = mirror(config, tmp_path)
    assert summary["status"] == "failed"
    assert "AccessDenied" in summary["error"]
    assert len(proxy.requests("PUT", "x.bin")) == 1


def test_large_files_go_multipart_with_our_hash(config, proxy, raw_s3, tmp_path):
    data = os.urandom(11 * 1024 * 1024)  # 3 parts of 5 MiB at most
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "big.pt").write_bytes(data)
    summary = mirror(config, tmp_path)
    assert summary["status"] == "completed", summary["error"]

    head = raw_s3.head_object(Bucket=config.bucket, Key=f"{BASE_KEY}/big.pt")
    assert head["ETag"].strip('"').endswith("-3")  # a multipart ETag: not a content hash
    assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert head["ContentLength"] == len(data)
    assert len(proxy.requests("PUT", "partNumber=")) == 3

    proxy.seen.clear()
    assert mirror(config, tmp_path)["skipped"] == 1  # idempotent for multipart objects too
    assert proxy.requests("PUT") == [] and proxy.requests("POST") == []


def test_upload_problems_never_raise(config, tmp_path):
    make_tree(tmp_path / "artifacts")
    no_bucket = mirror(replace(config, bucket="no-such-bucket-here"), tmp_path)
    assert no_bucket["status"] == "failed" and "NoSuchBucket" in no_bucket["error"]

    closed = replace(config, endpoint="http://127.0.0.1:9", max_attempts=1)
    unreachable = mirror(closed, tmp_path)
    assert unreachable["status"] == "failed" and unreachable["failed"] == 4

    missing = mirror_run_artifacts(
        config,
        artifacts_dir=tmp_path / "nowhere",
        results_dir=tmp_path / "results",
        remote_run_path=RUN_PATH,
        log=lambda _line: None,
    )
    assert missing["status"] == "failed" and "does not exist" in missing["error"]

    escaping = mirror_run_artifacts(
        config,
        artifacts_dir=tmp_path / "artifacts",
        results_dir=tmp_path / "results",
        remote_run_path="../elsewhere/run",
        log=lambda _line: None,
    )
    assert escaping["status"] == "failed" and "'..'" in escaping["error"]


def test_experiment_at_repo_root_maps_to_prefix_and_run_id(config, raw_s3, tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "x.bin").write_bytes(b"abc")
    summary = mirror_run_artifacts(
        config,
        artifacts_dir=tmp_path / "artifacts",
        results_dir=tmp_path / "results",
        remote_run_path="./run-1",  # relative_dir "." when the experiment is the repo root
        log=lambda _line: None,
    )
    assert summary["base_uri"] == f"s3://{config.bucket}/lab/rl/run-1/"
    assert raw_s3.get_object(Bucket=config.bucket, Key="lab/rl/run-1/x.bin")["Body"].read() == (
        b"abc"
    )


def _everything_written(*roots) -> str:
    return "\n".join(
        path.read_bytes().decode("utf-8", "replace")
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
    )


def test_secrets_never_written_or_logged(config, proxy, tmp_path, capsys):
    make_tree(tmp_path / "artifacts")
    # A server that echoes the access key id in its error, as some do.
    proxy.faults.append(
        Fault("PUT", "x.bin", status=403, code="InvalidAccessKeyId", echo_credential=True)
    )
    logs: list[str] = []
    failed = mirror(config, tmp_path, logs)
    assert failed["status"] == "failed"
    assert "***REDACTED***" in failed["error"]  # the leak was real, and redacted
    proxy.faults.clear()
    succeeded = mirror(config, tmp_path, logs)
    assert succeeded["status"] == "completed"

    captured = capsys.readouterr()
    written = "\n".join(
        [
            _everything_written(tmp_path / "results", tmp_path / "artifacts"),
            json.dumps(failed),
            json.dumps(succeeded),
            *logs,
            captured.out,
            captured.err,
        ]
    )
    assert "The key ***REDACTED*** is not valid" in written
    assert KEY_ID not in written
    assert APP_KEY not in written


def in_progress(raw_s3, bucket) -> list[str]:
    return [item["Key"] for item in raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


@pytest.mark.parametrize("receiver", ["main", "proxy"])
def test_ctrl_c_cancels_transfers_and_aborts_their_multipart_uploads(
    config, proxy, raw_s3, ctrl_c_raises, tmp_path, receiver
):
    files = make_tree(tmp_path / "artifacts")
    big = os.urandom(11 * 1024 * 1024)  # 3 parts
    (tmp_path / "artifacts" / "big.pt").write_bytes(big)
    # Part 2 is slow, and a real SIGINT arrives with it. Received by another thread, it does
    # not wake the main thread's wait: the mirror must still notice before part 2 completes.
    proxy.faults.append(
        Fault("PUT", "partNumber=2", times=1, status=0, delay_s=2.0, interrupt=receiver)
    )
    started = time.monotonic()
    summary = mirror(config, tmp_path)
    took = time.monotonic() - started

    assert summary["status"] == "failed" and "interrupted" in summary["error"]
    assert took < 15  # not the minutes a 100 MiB part queue could take: cancelled, not drained
    assert in_progress(raw_s3, config.bucket) == []  # no billed parts left behind
    index = json.loads((tmp_path / "results" / "remote_artifacts.json").read_text())
    by_path = {entry["path"]: entry for entry in index["files"]}
    assert set(by_path) == {*files, "big.pt"}
    assert (by_path["big.pt"]["status"], by_path["big.pt"]["error"]) == ("failed", "interrupted")

    rerun = mirror(config, tmp_path)
    assert rerun["status"] == "completed", rerun["error"]
    assert rerun["uploaded"] + rerun["skipped"] == 5
    body = raw_s3.get_object(Bucket=config.bucket, Key=f"{BASE_KEY}/big.pt")["Body"].read()
    assert body == big


_KILLABLE_MIRROR = f"""
import sys
from pathlib import Path
from rl_harness.harness.storage import B2Config, mirror_run_artifacts
bucket, endpoint, root, run_path = sys.argv[1:]
config = B2Config(bucket=bucket, endpoint=endpoint, key_id={KEY_ID!r}, application_key={APP_KEY!r},
    prefix="lab/rl", max_workers=2, multipart_threshold=8 << 20, multipart_chunksize=5 << 20,
    allow_http_loopback=True)
mirror_run_artifacts(config, artifacts_dir=Path(root) / "artifacts",
    results_dir=Path(root) / "results", remote_run_path=run_path)
"""


def test_killed_mid_multipart_then_rerun_leaves_nothing_billed(config, proxy, raw_s3, tmp_path):
    files = make_tree(tmp_path / "artifacts")
    files["big.pt"] = os.urandom(16 * 1024 * 1024)  # 4 parts of 5 MiB
    (tmp_path / "artifacts" / "big.pt").write_bytes(files["big.pt"])
    proxy.faults.append(Fault("PUT", "partNumber=3", times=1, status=0, delay_s=30.0))
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE_MIRROR, config.bucket, config.endpoint, tmp_path, RUN_PATH]
    )
    try:
        deadline = time.monotonic() + 60
        while not proxy.requests("PUT", "partNumber=3"):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        process.kill()  # SIGKILL mid-multipart: no handler, no abort, parts left behind
        process.wait()
    assert in_progress(raw_s3, config.bucket) == [f"{BASE_KEY}/big.pt"]
    proxy.faults.clear()

    logs: list[str] = []
    rerun = mirror(config, tmp_path, logs)
    assert rerun["status"] == "completed", rerun["error"]
    assert rerun["aborted_uploads"] == 1
    assert any("aborted 1 unfinished multipart upload" in line for line in logs)
    assert in_progress(raw_s3, config.bucket) == []
    wanted, problems = wanted_from_index(tmp_path / "results")
    report = download_files(config, wanted, tmp_path / "fetched", log=logs.append)
    assert problems == [] and report.ok, report.problems
    assert sorted(report.downloaded) == sorted(files)
    for rel, data in files.items():
        assert (tmp_path / "fetched" / rel).read_bytes() == data


def test_a_file_changed_while_uploading_is_failed_then_fixed_by_a_rerun(
    config, proxy, raw_s3, tmp_path
):
    make_tree(tmp_path / "artifacts")
    target = tmp_path / "artifacts" / "x.bin"
    proxy.faults.append(Fault("PUT", "x.bin", times=1, status=0, delay_s=1.0))

    def rewrite_while_in_flight():
        deadline = time.monotonic() + 30
        while not proxy.requests("PUT", "x.bin") and time.monotonic() < deadline:
            time.sleep(0.01)
        target.write_bytes(b"rewritten while the upload was on the wire")

    writer = threading.Thread(target=rewrite_while_in_flight)
    writer.start()
    first = mirror(config, tmp_path)
    writer.join()
    index = json.loads((tmp_path / "results" / "remote_artifacts.json").read_text())
    entry = next(e for e in index["files"] if e["path"] == "x.bin")
    assert entry["status"] == "failed" and "changed while uploading" in entry["error"]
    assert first["status"] == "failed"

    rerun = mirror(config, tmp_path)
    assert rerun["status"] == "completed" and (rerun["uploaded"], rerun["skipped"]) == (1, 3)
    obj = raw_s3.get_object(Bucket=config.bucket, Key=f"{BASE_KEY}/x.bin")
    assert obj["Body"].read() == target.read_bytes()
    assert obj["Metadata"]["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
