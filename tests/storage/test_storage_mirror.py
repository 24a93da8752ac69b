"""mirror_run_artifacts over real HTTP against moto: upload, resume, idempotence, retries."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import replace

from rl_harness.harness.storage import mirror_run_artifacts
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
    # Our per-file retries on top of botocore's per-request ones: 3 x 3 attempts.
    assert len(proxy.requests("PUT", "state.pt")) == 9

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
    # Four 503s: botocore's three quick attempts fail, our backoff retry then gets through.
    proxy.faults.append(Fault("PUT", "x.bin", times=4))
    proxy.faults.append(Fault("HEAD", "meta.json", times=1, status=500, code="InternalError"))
    summary = mirror(config, tmp_path)
    assert summary["status"] == "completed", summary["error"]
    assert summary["uploaded"] == 4
    assert len(proxy.requests("PUT", "x.bin")) == 5


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


def test_ctrl_c_during_upload_returns_failed_and_records_what_is_left(config, proxy, tmp_path):
    make_tree(tmp_path / "artifacts")
    # The first upload to arrive is slow, and Ctrl-C hits the main thread while it waits.
    proxy.faults.append(Fault("PUT", "", times=1, status=0, delay_s=1.0, interrupt_main=True))
    summary = mirror(replace(config, max_workers=1), tmp_path)
    assert summary["status"] == "failed"
    assert "interrupted" in summary["error"]
    index = json.loads((tmp_path / "results" / "remote_artifacts.json").read_text())
    assert len(index["files"]) == 4
    # None finished before Ctrl-C: all are recorded as interrupted.
    assert [entry["error"] for entry in index["files"]] == ["interrupted"] * 4
    # The upload in flight finishes in the background; the rerun then skips it.
    deadline = time.monotonic() + 30
    while any(t.name.startswith("b2-upload") for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rerun = mirror(config, tmp_path)
    assert rerun["status"] == "completed"
    assert rerun["skipped"] >= 1 and rerun["uploaded"] + rerun["skipped"] == 4
