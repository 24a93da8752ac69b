"""The boto3 S3 client for B2, the shared transfer manager, and cleanup of unfinished uploads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from s3transfer.manager import TransferManager

from rl_harness.harness.storage.config import B2Config

# boto3 ships no types and builds its client classes at run time: a client is Any to mypy.
type S3Client = Any

_PART_CONCURRENCY = 4  # requests in flight per file slot: parts of multipart files


def client_config(config: B2Config) -> Config:
    return Config(
        # Checksums only when an operation requires them. boto3 >= 1.36 sends CRC checksums by
        # default; B2 rejected them until it added support in 2025, and `when_required` is
        # safe either way (we verify our own sha256).
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        signature_version="s3v4",
        # The only retry layer: botocore retries each request (each part of a multipart upload
        # on its own) on connection errors, timeouts, throttling and 5xx, with jittered backoff.
        retries={"mode": "standard", "total_max_attempts": config.max_attempts},
        max_pool_connections=config.max_workers * _PART_CONCURRENCY + 2,
        connect_timeout=20,
        read_timeout=120,
    )


def make_s3_client(config: B2Config) -> S3Client:
    """A thread-safe S3 client for the B2 endpoint, with credentials passed explicitly."""
    session = boto3.session.Session(
        aws_access_key_id=config.key_id,
        aws_secret_access_key=config.application_key,
        region_name=config.region,
    )
    return session.client("s3", endpoint_url=config.endpoint, config=client_config(config))


def transfer_config(config: B2Config) -> TransferConfig:
    return TransferConfig(
        multipart_threshold=config.multipart_threshold,
        multipart_chunksize=config.multipart_chunksize,
        # One queue for every file of a run: this many requests (whole files or parts) at once.
        max_concurrency=config.max_workers * _PART_CONCURRENCY,
        use_threads=True,
        preferred_transfer_client="classic",  # the CRT client ignores our botocore Config
    )


def transfer_manager(client: S3Client, config: B2Config) -> TransferManager:
    """The one s3transfer manager a mirror or download shares across all its files.

    On failure or cancel, s3transfer aborts the multipart upload it started."""
    return TransferManager(client, transfer_config(config))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def error_status(exc: BaseException) -> int | None:
    """The HTTP status of the ClientError behind `exc`, if there is one."""
    for cause in _causes(exc):
        if isinstance(cause, botocore.exceptions.ClientError):
            status: int | None = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return status
    return None


def unfinished_uploads(client: S3Client, bucket: str, prefix: str) -> list[tuple[str, str]]:
    """(key, upload id) of every in-progress multipart upload under `prefix`."""
    found = []
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix=prefix
    ):
        found += [(item["Key"], item["UploadId"]) for item in page.get("Uploads", [])]
    return found


def abort_unfinished_uploads(
    client: S3Client, bucket: str, prefix: str, log: Callable[[str], None]
) -> int:
    """Abort every in-progress multipart upload under `prefix` (B2 bills their parts).

    We abort rather than resume: s3transfer cannot continue another process's upload, and
    trusting old parts would need their hashes checked against a file that may have changed.
    Returns how many were aborted; problems are logged, never raised."""
    aborted = 0
    try:
        for key, upload_id in unfinished_uploads(client, bucket, prefix):
            try:
                client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
                aborted += 1
            except Exception as exc:
                if error_status(exc) != 404:  # already gone: aborted or completed meanwhile
                    log(f"[storage] could not abort unfinished upload of {key}: {exc}")
    except Exception as exc:
        log(f"[storage] could not list unfinished uploads under {prefix}: {exc}")
    if aborted:
        log(f"[storage] aborted {aborted} unfinished multipart upload(s) under {prefix}")
    return aborted
