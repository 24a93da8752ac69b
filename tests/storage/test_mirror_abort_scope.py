"""Key-prefix scope with two runs whose ids are string prefixes of each other (run-1, run-10).

A mirror aborts the unfinished multipart uploads under its own run's prefix (those of a
killed earlier attempt of the same run) when it starts and after a failure; a download by
`s3://.../run-1` fetches that run's folder. Neither may touch run-10's objects or uploads,
nor those under another configured prefix that extends ours as a string (`lab/rl2`). Real
HTTP against moto.
"""

from __future__ import annotations

import os

from rl_harness.cli.storage import download_main
from rl_harness.harness.storage import mirror_run_artifacts
from tests.storage.s3_fakes import Fault

LEAF = "studies/mess3/ppo"
RUN_1 = f"lab/rl/{LEAF}/run-1"
RUN_10 = f"lab/rl/{LEAF}/run-10"
OTHER_PREFIX = f"lab/rl2/{LEAF}/run-1"  # config.prefix "lab/rl2": ours ("lab/rl") + "2"


def in_progress(raw_s3, bucket) -> list[str]:
    uploads = raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return sorted(item["Key"] for item in uploads)


def start_upload(raw_s3, bucket, key) -> None:
    """An unfinished multipart upload with one part, as a killed mirror leaves it."""
    upload = raw_s3.create_multipart_upload(Bucket=bucket, Key=key)
    raw_s3.upload_part(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * 1024
    )


def write_tree(root, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def mirror(config, tmp_path, run_id: str, logs: list[str] | None = None) -> dict:
    return mirror_run_artifacts(
        config,
        artifacts_dir=tmp_path / run_id / "artifacts",
        results_dir=tmp_path / run_id / "results",
        remote_run_path=f"{LEAF}/{run_id}",
        log=(logs.append if logs is not None else lambda _line: None),
    )


def test_a_mirror_aborts_only_its_own_runs_unfinished_uploads(config, raw_s3, tmp_path):
    for run_id in ("run-1", "run-10"):
        write_tree(tmp_path / run_id / "artifacts", {"x.bin": os.urandom(500)})
    start_upload(raw_s3, config.bucket, f"{RUN_1}/big.pt")  # run-1's own killed attempt
    start_upload(raw_s3, config.bucket, f"{RUN_10}/big.pt")  # run-10, still uploading
    start_upload(raw_s3, config.bucket, f"{OTHER_PREFIX}/big.pt")

    logs: list[str] = []
    summary = mirror(config, tmp_path, "run-1", logs)
    assert summary["status"] == "completed", summary["error"]
    assert summary["aborted_uploads"] == 1
    assert any(f"aborted 1 unfinished multipart upload(s) under {RUN_1}/" in x for x in logs)
    assert in_progress(raw_s3, config.bucket) == [f"{RUN_10}/big.pt", f"{OTHER_PREFIX}/big.pt"]

    # The other way round: the longer id's mirror leaves the shorter one's uploads alone.
    start_upload(raw_s3, config.bucket, f"{RUN_1}/later.pt")
    summary = mirror(config, tmp_path, "run-10")
    assert summary["status"] == "completed", summary["error"]
    assert summary["aborted_uploads"] == 1
    assert in_progress(raw_s3, config.bucket) == [f"{RUN_1}/later.pt", f"{OTHER_PREFIX}/big.pt"]


def test_the_cleanup_after_a_failed_file_keeps_to_the_runs_prefix(config, proxy, raw_s3, tmp_path):
    write_tree(tmp_path / "run-1" / "artifacts", {"x.bin": os.urandom(500), "y.bin": b"y"})
    start_upload(raw_s3, config.bucket, f"{RUN_10}/big.pt")
    proxy.faults.append(Fault("PUT", "run-1/x.bin", status=403, code="AccessDenied"))
    summary = mirror(config, tmp_path, "run-1")
    assert summary["status"] == "failed" and summary["failed"] == 1
    assert summary["aborted_uploads"] == 0
    assert in_progress(raw_s3, config.bucket) == [f"{RUN_10}/big.pt"]


def test_download_of_a_run_folder_fetches_that_run_only(b2_env, config, tmp_path, capsys):
    one = {"x.bin": os.urandom(700), "ckpt/state.pt": os.urandom(900)}
    ten = {"x.bin": os.urandom(300), "other.pt": os.urandom(200)}
    write_tree(tmp_path / "run-1" / "artifacts", one)
    write_tree(tmp_path / "run-10" / "artifacts", ten)
    for run_id in ("run-1", "run-10"):
        assert mirror(config, tmp_path, run_id)["status"] == "completed"

    for uri in (f"s3://{config.bucket}/{RUN_1}", f"s3://{config.bucket}/{RUN_1}/"):
        dest = tmp_path / "fetched" / str(len(uri))
        assert download_main([uri, "--dest", str(dest)]) == 0, capsys.readouterr().err
        files = [p for p in dest.rglob("*") if p.is_file()]
        assert {p.relative_to(dest).as_posix(): p.read_bytes() for p in files} == one
