"""B2 mirror settings from the environment or an env file; secrets kept out of repr."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
ENV_FILE_VAR = "RL_HARNESS_B2_ENV_FILE"
# Tests (and a local S3 stand-in) speak plain HTTP on 127.0.0.1; B2 itself accepts only HTTPS.
ALLOW_HTTP_VAR = "RL_HARNESS_B2_ALLOW_HTTP_LOOPBACK"

# Each setting: the B2 name first, then the AWS-style fallbacks, in order of preference.
_BUCKET = ("B2_BUCKET",)
_ENDPOINT = ("B2_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_KEY_ID = ("B2_APPLICATION_KEY_ID", "AWS_ACCESS_KEY_ID")
_KEY = ("B2_APPLICATION_KEY", "AWS_SECRET_ACCESS_KEY")
_PREFIX = ("B2_PREFIX",)
_REGION = ("AWS_REGION", "AWS_DEFAULT_REGION")
# B2 endpoints name their region: https://s3.us-west-004.backblazeb2.com
_B2_ENDPOINT_REGION = re.compile(r"^s3\.([a-z0-9-]+)\.backblazeb2\.com$")


class StorageConfigError(ValueError):
    """B2 is half-configured or configured wrongly. Messages name variables, never their values."""


@dataclass(frozen=True)
class B2Config:
    """Where and how to mirror artifacts. The key id and key never appear in repr or str."""

    bucket: str
    endpoint: str  # full URL, e.g. https://s3.us-west-004.backblazeb2.com
    key_id: str = field(repr=False)
    application_key: str = field(repr=False)
    prefix: str = ""  # no leading or trailing slash
    region: str = "us-east-1"
    max_workers: int = 8  # files transferred at once
    multipart_threshold: int = 100 * MiB  # B2 recommends 100 MB parts; its minimum is 5 MB
    multipart_chunksize: int = 100 * MiB
    max_attempts: int = 5  # botocore standard retry mode: attempts per request (and per part)
    allow_http_loopback: bool = False  # http:// allowed only to 127.0.0.0/8, ::1, localhost

    def __post_init__(self) -> None:
        if not self.bucket:
            raise StorageConfigError("B2 bucket name is empty")
        if not self.key_id or not self.application_key:
            raise StorageConfigError("B2 key id and application key must both be set")
        if not self.endpoint.startswith(("http://", "https://")):
            raise StorageConfigError("B2 endpoint must be an https:// URL")
        if self.endpoint.startswith("http://"):
            if not self.allow_http_loopback:
                raise StorageConfigError(
                    "B2 endpoint must use https:// (B2 rejects plain HTTP); for a local test "
                    f"server on a loopback address set {ALLOW_HTTP_VAR}=1"
                )
            if not _is_loopback(endpoint_host(self.endpoint)):
                raise StorageConfigError(
                    f"{ALLOW_HTTP_VAR} allows http:// only to a loopback address "
                    "(127.0.0.0/8, ::1, localhost)"
                )
        if self.max_workers < 1 or self.max_attempts < 1:
            raise StorageConfigError("max_workers and max_attempts must be at least 1")
        if self.multipart_threshold < 1 or self.multipart_chunksize < 1:
            raise StorageConfigError("multipart sizes must be positive")

    def secrets(self) -> tuple[str, str]:
        """Values to redact from anything this package writes or logs."""
        return (self.key_id, self.application_key)

    def public_dict(self) -> dict[str, Any]:
        """The non-secret settings, for manifests and indexes."""
        return {
            "bucket": self.bucket,
            "endpoint": self.endpoint,
            "prefix": self.prefix,
            "region": self.region,
        }


def endpoint_host(endpoint: str) -> str:
    """The host of an endpoint URL, without port or brackets."""
    netloc = endpoint.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0]
    return netloc.split(":", 1)[0]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_env_file(path: Path) -> dict[str, str]:
    """Parse KEY=VALUE lines (optional `export `, # comments, surrounding quotes stripped)."""
    path = Path(path)
    if not path.is_file():
        raise StorageConfigError(f"{ENV_FILE_VAR} points at {path}, which is not a file")
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            # Never echo the line: it may hold a secret.
            raise StorageConfigError(f"{path}:{number}: expected NAME=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _normalise_endpoint(endpoint: str) -> str:
    if "://" not in endpoint:
        endpoint = "https://" + endpoint  # B2 shows endpoints without a scheme
    return endpoint.rstrip("/")


def _region_for(endpoint: str, env: Mapping[str, str]) -> str:
    host = endpoint_host(endpoint)
    match = _B2_ENDPOINT_REGION.match(host)
    if match:
        return match.group(1)
    return _first(env, _REGION) or "us-east-1"


def merged_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with the env file (if RL_HARNESS_B2_ENV_FILE names one) laid over it."""
    env = dict(os.environ if environ is None else environ)
    env_file = env.get(ENV_FILE_VAR, "").strip()
    if env_file:
        # The file is named explicitly for this tool, so its values win over the shell's.
        env.update(read_env_file(Path(env_file).expanduser()))
    return env


def load_b2_config(environ: Mapping[str, str] | None = None) -> B2Config | None:
    """B2 settings from `environ` (default os.environ); None when B2_BUCKET is not set.

    B2_BUCKET is the switch: the key variables alone (which the b2 CLI also reads) do not turn
    mirroring on. With B2_BUCKET set, a missing endpoint or key is an error, and so is
    B2_ENDPOINT or B2_PREFIX without B2_BUCKET.
    """
    env = merged_environment(environ)
    bucket = _first(env, _BUCKET)
    if bucket is None:
        stray = [name for name in ("B2_ENDPOINT", "B2_PREFIX") if env.get(name, "").strip()]
        if stray:
            raise StorageConfigError(
                f"B2 is half-configured: {', '.join(stray)} set but B2_BUCKET is not"
            )
        return None
    endpoint = _first(env, _ENDPOINT)
    key_id = _first(env, _KEY_ID)
    key = _first(env, _KEY)
    missing = [
        " or ".join(names)
        for names, value in ((_ENDPOINT, endpoint), (_KEY_ID, key_id), (_KEY, key))
        if value is None
    ]
    if missing:
        raise StorageConfigError(
            "B2 is half-configured: B2_BUCKET is set but these are not: " + "; ".join(missing)
        )
    assert endpoint is not None and key_id is not None and key is not None
    endpoint = _normalise_endpoint(endpoint)
    return B2Config(
        bucket=bucket,
        endpoint=endpoint,
        key_id=key_id,
        application_key=key,
        prefix=(_first(env, _PREFIX) or "").strip("/"),
        region=_region_for(endpoint, env),
        allow_http_loopback=env.get(ALLOW_HTTP_VAR, "").strip() == "1",
    )


def required_b2_config(environ: Mapping[str, str] | None = None) -> B2Config:
    """The B2 config of `rl-harness upload` and `download`; StorageConfigError when absent."""
    config = load_b2_config(environ)
    if config is None:
        raise StorageConfigError(
            "B2 is not configured: set B2_BUCKET, B2_ENDPOINT, B2_APPLICATION_KEY_ID and "
            f"B2_APPLICATION_KEY (or name an env file in {ENV_FILE_VAR}); "
            "see docs/artifact_storage.md"
        )
    return config


def resolve_upload_config(
    upload_artifacts: bool | None, environ: Mapping[str, str] | None = None
) -> B2Config | None:
    """The config to mirror with, given --upload-artifacts (True), --no-upload-artifacts (False)
    or neither (None: upload when configured)."""
    if upload_artifacts is False:
        return None  # not even parsed: --no-upload-artifacts must work when half-configured
    config = load_b2_config(environ)
    if upload_artifacts and config is None:
        raise StorageConfigError(
            "--upload-artifacts needs B2 configured: set B2_BUCKET, B2_ENDPOINT, "
            f"B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY (or name an env file in {ENV_FILE_VAR})"
        )
    return config
