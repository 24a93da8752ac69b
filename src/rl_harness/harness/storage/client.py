"""The boto3 S3 client for B2, transfer settings, and retries with exponential backoff."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from rl_harness.harness.storage.config import B2Config

_PART_CONCURRENCY = 4  # parts of one multipart file in flight at once
_REQUEST_ATTEMPTS = 3  # botocore's quick per-request retries (each part retries on its own)
_MAX_DELAY_S = 30.0
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
_TRANSIENT_CODES = {
    "RequestTimeout",
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
}
_TRANSIENT_TYPES = (
    botocore.exceptions.ConnectionError,
    botocore.exceptions.HTTPClientError,
    botocore.exceptions.IncompleteReadError,
)


def client_config(config: B2Config) -> Config:
    return Config(
        # B2 rejects the CRC checksums boto3 >= 1.36 sends by default.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        signature_version="s3v4",
        retries={"mode": "standard", "total_max_attempts": _REQUEST_ATTEMPTS},
        max_pool_connections=config.max_workers * _PART_CONCURRENCY + 2,
        connect_timeout=20,
        read_timeout=120,
    )


def make_s3_client(config: B2Config):
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
        max_concurrency=_PART_CONCURRENCY,
        use_threads=True,
        preferred_transfer_client="classic",  # the CRT client ignores our botocore Config
    )


def _causes(exc: BaseException):
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: connection trouble, timeouts, throttling and 5xx, also when wrapped
    (boto3's S3UploadFailedError carries the ClientError as its context)."""
    for cause in _causes(exc):
        if isinstance(cause, _TRANSIENT_TYPES):
            return True
        if isinstance(cause, botocore.exceptions.ClientError):
            error = cause.response.get("Error", {})
            status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return status in _TRANSIENT_STATUS or error.get("Code") in _TRANSIENT_CODES
    return False


def error_status(exc: BaseException) -> int | None:
    """The HTTP status of the ClientError behind `exc`, if there is one."""
    for cause in _causes(exc):
        if isinstance(cause, botocore.exceptions.ClientError):
            return cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def with_retries[T](
    action: Callable[[], T],
    *,
    attempts: int,
    base_delay_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `action`, retrying transient failures with jittered exponential backoff."""
    for attempt in range(attempts):
        try:
            return action()
        except Exception as exc:
            if attempt + 1 >= attempts or not is_transient(exc):
                raise
            delay = min(_MAX_DELAY_S, base_delay_s * 2**attempt)
            sleep(delay * (0.5 + 0.5 * random.random()))  # jitter spreads parallel retries
    raise AssertionError("unreachable")
