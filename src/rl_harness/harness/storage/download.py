"""Fetch mirrored artifacts and verify every file's sha256 before it lands in place."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from s3transfer.manager import TransferManager

from rl_harness.harness.atomic import read_json
from rl_harness.harness.layout import conventional_artifacts_dir
from rl_harness.harness.provenance import sha256_file
from rl_harness.harness.redaction import redact, secret_values
from rl_harness.harness.storage.client import S3Client, make_s3_client, transfer_manager
from rl_harness.harness.storage.config import B2Config
from rl_harness.harness.storage.layout import (
    INDEX_FILE,
    clean_relative,
    parse_s3_uri,
)
from rl_harness.harness.storage.upload import describe_error, remote_object

_VERIFY_ATTEMPTS = 2  # a download whose sha256 mismatches is fetched once more


class IntegrityError(Exception):
    """A downloaded object's size or sha256 differs from what was recorded."""


@dataclass(frozen=True)
class WantedFile:
    path: str  # relative, '/'-separated, checked for '..'
    bucket: str
    key: str
    size: int | None
    sha256: str | None  # None: look it up in the object's metadata


@dataclass
class DownloadReport:
    dest: Path
    downloaded: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "path: reason", redacted

    @property
    def ok(self) -> bool:
        return not self.problems


def wanted_from_index(results_dir: Path) -> tuple[list[WantedFile], list[str]]:
    """Files recorded in results_dir/remote_artifacts.json, and problems (files never uploaded)."""
    index_path = Path(results_dir) / INDEX_FILE
    if not index_path.is_file():
        raise FileNotFoundError(
            f"{index_path} does not exist: this run was never mirrored "
            "(try `rl-harness upload RUN_DIR`)"
        )
    index = read_json(index_path)
    wanted, problems = [], []
    for entry in index["files"]:
        if entry["status"] == "failed" or entry.get("sha256") is None:
            problems.append(f"{entry['path']}: never uploaded ({entry.get('error')})")
            continue
        wanted.append(
            WantedFile(
                path=clean_relative(entry["path"], "recorded path"),
                bucket=index["bucket"],
                key=entry["key"],
                size=entry["size"],
                sha256=entry["sha256"],
            )
        )
    return wanted, problems


def wanted_from_uri(client: S3Client, uri: str) -> list[WantedFile]:
    """Every object under the `s3://bucket/prefix/` folder, or the single object `uri` names."""
    bucket, key = parse_s3_uri(uri)
    folder = key.rstrip("/") + "/" if key.strip("/") else ""
    wanted = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder):
        for item in page.get("Contents", []):
            rel = clean_relative(item["Key"][len(folder) :], "object key")
            if rel:
                wanted.append(WantedFile(rel, bucket, item["Key"], int(item["Size"]), None))
    if not wanted and key and not key.endswith("/"):
        name = clean_relative(key.rsplit("/", 1)[-1], "object key")
        wanted.append(WantedFile(name, bucket, key, None, None))
    return wanted


class NothingToDownload(LookupError):
    """An `s3://` URI under which the bucket holds nothing."""


@dataclass(frozen=True)
class DownloadPlan:
    """What `rl-harness download TARGET` fetches, and where (`plan_download`)."""

    wanted: list[WantedFile]
    dest: Path
    problems: list[str]  # files the run's index records as never uploaded
    client: Any = None  # the S3 client that listed a URI, reused for the download


def plan_download(config: B2Config, target: str, dest: Path | None = None) -> DownloadPlan:
    """A results/<run-id>/ folder: the files of its remote_artifacts.json, `dest` defaulting
    to <leaf>/artifacts/<run-id>/. An `s3://bucket/prefix/` URI: every object under it (each
    checked against its sha256 metadata), `dest` defaulting to ./<last part of the URI>.

    Raises NothingToDownload for an empty URI; OSError, ValueError or KeyError for a bad
    target or index; whatever the S3 client raises when listing the bucket fails."""
    if target.startswith("s3://"):
        client = make_s3_client(config)
        wanted = wanted_from_uri(client, target)
        if not wanted:
            raise NothingToDownload(f"nothing found under {target}")
        return DownloadPlan(wanted, dest or Path(target.rstrip("/").rsplit("/", 1)[-1]), [], client)
    run_dir = Path(target).expanduser().resolve()
    wanted, problems = wanted_from_index(run_dir)
    return DownloadPlan(wanted, dest or conventional_artifacts_dir(run_dir), problems)


def _fetch(client: S3Client, manager: TransferManager, item: WantedFile, dest: Path) -> str:
    """Download one file to dest/path through a verified temp file; 'downloaded' or 'present'."""
    expected_sha, expected_size = item.sha256, item.size
    if expected_sha is None:
        remote = remote_object(client, item.bucket, item.key)
        if remote is None:
            raise FileNotFoundError(f"no object {item.key}")
        expected_sha, expected_size = remote
        if expected_sha is None:
            raise IntegrityError("object has no sha256 metadata, so it cannot be verified")
    target = dest / item.path
    if target.is_file() and sha256_file(target) == expected_sha:
        return "present"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Created with the umask's mode like every record (mkstemp would make it 0600).
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.part"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    tmp_name = str(tmp)
    try:
        # Transport errors are botocore's (and s3transfer's, for a body cut off mid-read) to
        # retry; the one thing they cannot know is a body that arrived whole but wrong.
        for attempt in range(_VERIFY_ATTEMPTS):
            manager.download(item.bucket, item.key, tmp_name).result()
            size = tmp.stat().st_size
            actual = sha256_file(tmp)
            if (expected_size is None or size == expected_size) and actual == expected_sha:
                break
            if attempt + 1 == _VERIFY_ATTEMPTS:
                if expected_size is not None and size != expected_size:
                    raise IntegrityError(f"size {size} != recorded {expected_size}")
                raise IntegrityError(
                    f"sha256 {actual} != recorded {expected_sha} (corrupted object)"
                )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return "downloaded"


def download_files(
    config: B2Config,
    wanted: list[WantedFile],
    dest: Path,
    *,
    client: S3Client | None = None,
    log: Callable[[str], None] = print,
) -> DownloadReport:
    """Fetch `wanted` into `dest` in parallel; problems are collected, never raised."""
    secrets = [*config.secrets(), *secret_values()]
    client = client or make_s3_client(config)
    report = DownloadReport(dest=Path(dest))
    report.dest.mkdir(parents=True, exist_ok=True)

    def one(item: WantedFile) -> tuple[WantedFile, str | None, str | None]:
        try:
            return item, _fetch(client, manager, item, report.dest), None
        except Exception as exc:
            return item, None, describe_error(exc, secrets)

    with (
        transfer_manager(client, config) as manager,  # one shared queue for every file
        ThreadPoolExecutor(config.max_workers, thread_name_prefix="b2-download") as pool,
    ):
        for item, outcome, error in pool.map(one, wanted):
            if outcome == "downloaded":
                report.downloaded.append(item.path)
            elif outcome == "present":
                report.already_present.append(item.path)
            else:
                report.problems.append(f"{item.path}: {error}")
                log(redact(f"[storage] download failed: {item.path}: {error}", secrets))
    return report
