"""Mirror a run's artifacts tree to B2: parallel, idempotent by sha256, and never raising;
`plan_run_upload` / `upload_run`: the same for a finished run folder (`rl-harness upload`),
its manifest updated."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from s3transfer.futures import TransferFuture
from s3transfer.manager import TransferManager

from rl_harness.harness.atomic import write_json_atomic
from rl_harness.harness.layout import MANIFEST_NAME, conventional_artifacts_dir
from rl_harness.harness.manifest import manifest_path, read_manifest, write_manifest
from rl_harness.harness.provenance import sha256_file
from rl_harness.harness.redaction import redact, secret_values
from rl_harness.harness.storage.client import (
    S3Client,
    abort_unfinished_uploads,
    error_status,
    make_s3_client,
    transfer_manager,
)
from rl_harness.harness.storage.config import B2Config
from rl_harness.harness.storage.layout import (
    INDEX_FILE,
    clean_relative,
    local_files,
    object_key,
    s3_uri,
)

BACKEND = "b2"
SHA256_METADATA = "sha256"  # stored as x-amz-meta-sha256: a multipart ETag is no content hash
_CANCEL_WAIT_S = 5.0  # after Ctrl-C: how long transfers get to stop before we abort the rest
# CPython runs signal handlers on the main thread only, and a SIGINT the kernel hands to a
# worker thread does not wake a main thread blocked in a wait: so we wait in short slices.
_SIGNAL_POLL_S = 0.2


@dataclass
class FileRecord:
    path: str  # relative to the artifacts dir, '/'-separated
    key: str
    uri: str
    size: int | None
    sha256: str | None
    status: str  # "uploaded" | "skipped" (already there with this sha256) | "failed"
    error: str | None = None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_error(exc: BaseException, secrets: list[str]) -> str:
    return redact(f"{type(exc).__name__}: {exc}", secrets)


def remote_object(client: S3Client, bucket: str, key: str) -> tuple[str | None, int] | None:
    """(our sha256 metadata, size) of an object, or None when it does not exist."""
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if error_status(exc) == 404:
            return None
        raise
    return head.get("Metadata", {}).get(SHA256_METADATA), int(head["ContentLength"])


class _Interrupted(Exception):
    """The mirror was told to stop (Ctrl-C) before this file was done."""


def _mirror_file(
    client: S3Client,
    config: B2Config,
    manager: TransferManager,
    rel: str,
    path: Path,
    key: str,
    secrets: list[str],
    stop: threading.Event,
    live: set[TransferFuture],
    lock: threading.Lock,
) -> FileRecord:
    record = FileRecord(rel, key, s3_uri(config.bucket, key), None, None, "failed")
    try:
        if stop.is_set():
            raise _Interrupted
        record.size = path.stat().st_size
        record.sha256 = digest = sha256_file(path)
        if remote_object(client, config.bucket, key) == (digest, record.size):
            record.status = "skipped"
            return record
        future = manager.upload(
            str(path), config.bucket, key, extra_args={"Metadata": {SHA256_METADATA: digest}}
        )
        with lock:
            live.add(future)
        if stop.is_set():  # Ctrl-C came between our check and the submit
            future.cancel()
        try:
            future.result()
        finally:
            with lock:
                live.discard(future)
        # What botocore cannot know: the file changed under us, so the sha256 we stored lies.
        if sha256_file(path) != digest:
            raise ValueError("file changed while uploading; rerun `rl-harness upload RUN_DIR`")
        record.status = "uploaded"
    except (_Interrupted, CancelledError):  # s3transfer's CancelledError is this one
        record.error = "interrupted"
    except Exception as exc:
        record.error = describe_error(exc, secrets)
    return record


class _UploadInterrupted(Exception):
    pass


def _interrupted_records(
    config: B2Config,
    files: list[tuple[str, Path]],
    run_path: str,
    records: dict[str, FileRecord],
) -> list[FileRecord]:
    out = []
    for rel, _ in files:
        if rel not in records:
            key = object_key(config.prefix, run_path, rel)
            records[rel] = FileRecord(
                rel, key, s3_uri(config.bucket, key), None, None, "failed", "interrupted"
            )
        out.append(records[rel])
    return out


def _mirror_all(
    client: S3Client,
    config: B2Config,
    files: list[tuple[str, Path]],
    run_path: str,
    secrets: list[str],
    say: Callable[[str], None],
) -> tuple[list[FileRecord], int]:
    """Mirror `files` through one shared transfer manager; (records, multipart uploads aborted).

    Unfinished multipart uploads under the run's prefix (from a killed run) are aborted first.
    On Ctrl-C every transfer is cancelled, its multipart upload aborted (by s3transfer, and
    then by listing what is left), and _UploadInterrupted carries the records."""
    prefix = object_key(config.prefix, run_path, "") + "/"
    aborted = abort_unfinished_uploads(client, config.bucket, prefix, say)
    manager = transfer_manager(client, config)
    stop, lock = threading.Event(), threading.Lock()
    live: set[TransferFuture] = set()
    records: dict[str, FileRecord] = {}
    pool = ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="b2-upload")
    futures: list[Future[FileRecord]] = [
        pool.submit(
            _mirror_file,
            client,
            config,
            manager,
            rel,
            path,
            object_key(config.prefix, run_path, rel),
            secrets,
            stop,
            live,
            lock,
        )
        for rel, path in files
    ]
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=_SIGNAL_POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                record = future.result()
                records[record.path] = record
    except KeyboardInterrupt:
        try:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            with lock:
                for transfer in list(live):
                    transfer.cancel()
            # Cancelled transfers finish their request in flight, then s3transfer aborts
            # their multipart uploads; whatever is still open after a short wait we abort.
            finished, _ = wait(futures, timeout=_CANCEL_WAIT_S)
            for future in finished:
                if not future.cancelled():
                    record = future.result()
                    records[record.path] = record
            aborted += abort_unfinished_uploads(client, config.bucket, prefix, say)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C skips the cleanup; the next mirror's start aborts leftovers
        raise _UploadInterrupted(
            _interrupted_records(config, files, run_path, records), aborted
        ) from None
    pool.shutdown()
    manager.shutdown()
    ordered = [records[rel] for rel, _ in files]
    if any(record.status == "failed" for record in ordered):
        aborted += abort_unfinished_uploads(client, config.bucket, prefix, say)
    return ordered, aborted


def mirror_run_artifacts(
    config: B2Config,
    *,
    artifacts_dir: Path,
    results_dir: Path,
    remote_run_path: str,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Upload every file under `artifacts_dir` to `{prefix}/{remote_run_path}/...`.

    Files already present with the same sha256 are skipped, so a rerun resumes where a failed
    one stopped. Writes `results_dir/remote_artifacts.json` and returns the summary for
    manifest["artifacts"]["remote"]. Never raises for upload problems: status "failed" and a
    redacted reason say what went wrong.
    """
    secrets = [*config.secrets(), *secret_values()]
    start = time.monotonic()
    summary: dict[str, Any] = {
        "backend": BACKEND,
        **config.public_dict(),
        "base_uri": None,
        "status": "failed",
        "files": 0,
        "uploaded": 0,
        "skipped": 0,
        "failed": 0,
        "bytes": 0,
        "bytes_uploaded": 0,
        "aborted_uploads": 0,
        "index": INDEX_FILE,
        "started_at": _now(),
        "ended_at": None,
        "duration_s": None,
        "error": None,
    }

    def say(message: str) -> None:
        log(redact(message, secrets))

    records: list[FileRecord] = []
    try:
        run_path = clean_relative(str(remote_run_path), "remote_run_path")
        if not run_path:
            raise ValueError("remote_run_path is empty")
        summary["base_uri"] = s3_uri(config.bucket, object_key(config.prefix, run_path, "") + "/")
        artifacts_dir = Path(artifacts_dir)
        if not artifacts_dir.is_dir():
            raise FileNotFoundError(f"artifacts dir does not exist: {artifacts_dir}")
        files = local_files(artifacts_dir)
        say(f"[storage] mirroring {len(files)} files from {artifacts_dir} to {summary['base_uri']}")
        client = make_s3_client(config)
        records, summary["aborted_uploads"] = _mirror_all(
            client, config, files, run_path, secrets, say
        )
    except _UploadInterrupted as interrupted:
        records, summary["aborted_uploads"] = interrupted.args
        summary["error"] = "upload interrupted; rerun with `rl-harness upload RUN_DIR`"
    except Exception as exc:
        summary["error"] = describe_error(exc, secrets)

    failed = [record for record in records if record.status == "failed"]
    for record in failed:
        say(f"[storage] upload failed: {record.path}: {record.error}")
    if failed and summary["error"] is None:
        summary["error"] = (
            f"{len(failed)} of {len(records)} files failed (first: {failed[0].path}: "
            f"{failed[0].error}); rerun with `rl-harness upload RUN_DIR`"
        )
    summary.update(
        files=len(records),
        uploaded=sum(record.status == "uploaded" for record in records),
        skipped=sum(record.status == "skipped" for record in records),
        failed=len(failed),
        bytes=sum(record.size or 0 for record in records),
        bytes_uploaded=sum(record.size or 0 for record in records if record.status == "uploaded"),
        status="completed" if summary["error"] is None else "failed",
        ended_at=_now(),
        duration_s=round(time.monotonic() - start, 3),
    )
    index = {
        "schema_version": 1,
        **{k: summary[k] for k in ("backend", "bucket", "endpoint", "prefix", "base_uri")},
        "status": summary["status"],
        "written_at": summary["ended_at"],
        "files": [asdict(record) for record in records],
    }
    try:
        write_json_atomic(Path(results_dir) / INDEX_FILE, index)
    except Exception as exc:
        summary["status"] = "failed"
        summary["error"] = describe_error(exc, secrets)
    say(
        f"[storage] {summary['status']}: {summary['uploaded']} uploaded, "
        f"{summary['skipped']} already present, {summary['failed']} failed "
        f"({summary['bytes']} bytes) in {summary['duration_s']} s"
    )
    return summary


class RunUploadError(ValueError):
    """A folder that is not an uploadable run: no manifest, or one lacking what an upload
    needs (the CLI prints it as one line, exit code 2)."""


@dataclass(frozen=True)
class RunUpload:
    """A finished run's upload, read from its manifest (`plan_run_upload`)."""

    results_dir: Path
    artifacts_dir: Path
    remote_run_path: str  # {experiment.relative_dir}/{run_id}, as at the run's end
    still_running: bool  # the manifest says "running": its end will overwrite artifacts.remote


def plan_run_upload(run_dir: Path) -> RunUpload:
    """What uploading results/<run-id>/ `run_dir` means; RunUploadError when it is no run.

    The artifacts are where the manifest's `artifacts.local` says, else (a run copied from
    another host) where the layout puts them beside the results folder."""
    run_dir = Path(run_dir).expanduser().resolve()
    manifest_file = manifest_path(run_dir)
    if not manifest_file.is_file():
        raise RunUploadError(f"{run_dir} holds no {MANIFEST_NAME}; pass results/<run-id>/")
    manifest = read_manifest(run_dir)
    try:
        run_id = manifest["run_id"]
        relative_dir = manifest["experiment"]["relative_dir"]
        local = manifest["artifacts"]["local"]
    except (KeyError, TypeError) as error:
        raise RunUploadError(f"{manifest_file} lacks {error}") from None
    artifacts_dir = Path(local) if local else None
    if artifacts_dir is None or not artifacts_dir.is_dir():
        artifacts_dir = conventional_artifacts_dir(run_dir.parent / run_id)
    return RunUpload(
        results_dir=run_dir,
        artifacts_dir=artifacts_dir,
        remote_run_path=f"{relative_dir}/{run_id}",
        still_running=manifest.get("status") == "running",
    )


def upload_run(config: B2Config, upload: RunUpload) -> dict[str, Any]:
    """Mirror the run's artifacts (`mirror_run_artifacts`) and record the summary as the
    manifest's `artifacts.remote`, redacted of the config's keys too (an env file's B2 key is
    no environment value). Returns the summary; never raises for upload problems."""
    summary = mirror_run_artifacts(
        config,
        artifacts_dir=upload.artifacts_dir,
        results_dir=upload.results_dir,
        remote_run_path=upload.remote_run_path,
    )
    manifest = read_manifest(upload.results_dir)  # fresh, in case it changed while we uploaded
    manifest.setdefault("artifacts", {})["remote"] = summary
    write_manifest(upload.results_dir, manifest, secrets=config.secrets())
    return summary
