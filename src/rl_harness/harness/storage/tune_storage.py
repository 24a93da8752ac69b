"""Tune's storage (trial checkpoints and results) on the B2/S3 bucket, through pyarrow's S3
filesystem: on a multi-node cluster, every node writes where the driver and analysis read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rl_harness.harness.manifest import load_manifest
from rl_harness.harness.storage.config import B2Config, StorageConfigError, load_b2_config
from rl_harness.harness.storage.layout import object_key, parse_s3_uri

if TYPE_CHECKING:  # pyarrow is imported only when a bucket is used
    from pyarrow.fs import S3FileSystem

TuneStorage = Literal["auto", "local", "bucket"]
TUNE_STORAGE_CHOICES = ("auto", "local", "bucket")


def s3_filesystem(config: B2Config) -> S3FileSystem:
    """pyarrow's S3FileSystem for the configured endpoint, credentials passed explicitly."""
    from pyarrow import fs

    scheme, _, host = config.endpoint.partition("://")
    return fs.S3FileSystem(
        access_key=config.key_id,
        secret_key=config.application_key,
        region=config.region,
        scheme=scheme,  # https, or http to loopback when the config allows it (tests)
        endpoint_override=host,
    )


def _remote_run_path(results_dir: Path, experiment_dir: Path, run_id: str) -> str:
    """`{experiment dir relative to its repo}/{run-id}`, as the artifact mirror lays it out."""
    relative = (load_manifest(results_dir) or {}).get("experiment", {}).get("relative_dir")
    return f"{(relative or Path(experiment_dir).name).strip('/')}/{run_id}"


def is_multi_node() -> bool:
    """True when the connected Ray cluster has more than one live node."""
    import ray

    return len({node["NodeID"] for node in ray.nodes() if node.get("Alive")}) > 1


def tune_storage(
    choice: TuneStorage,
    *,
    results_dir: Path,
    experiment_dir: Path,
    artifacts_dir: Path,
    run_id: str,
    local_dir: str,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, S3FileSystem | None, str | None]:
    """(storage_path, storage_filesystem, s3 URI or None) for Tune's RunConfig.

    "local": artifacts/<run-id>/tune (this machine's disk). "bucket": the configured bucket,
    at `{B2_PREFIX}/{experiment dir}/{run-id}/tune`, where the end-of-run mirror would have
    put the local folder. "auto": the bucket when B2 is configured and Ray runs on more than
    one node (other nodes' disks are out of the driver's reach), else local.
    """
    if choice not in TUNE_STORAGE_CHOICES:
        raise ValueError(f"tune_storage must be one of {TUNE_STORAGE_CHOICES}, got {choice!r}")
    if choice == "local":
        return local_dir, None, None
    config = load_b2_config(environ)
    if config is None:
        if choice == "bucket":
            raise StorageConfigError(
                "tune_storage='bucket' needs B2 configured (B2_BUCKET, B2_ENDPOINT, "
                "B2_APPLICATION_KEY_ID, B2_APPLICATION_KEY); see docs/multi_node.md"
            )
        return local_dir, None, None
    if choice == "auto" and not is_multi_node():
        return local_dir, None, None
    run_path = _remote_run_path(results_dir, experiment_dir, run_id)
    path = f"{config.bucket}/{object_key(config.prefix, run_path, 'tune')}"
    return path, s3_filesystem(config), f"s3://{path}"


def as_uri(path: str, filesystem: S3FileSystem | None) -> str:
    """How a Tune path is recorded: `s3://bucket/key` on the bucket, else the local path."""
    path = str(path)
    if filesystem is None or path.startswith("s3://"):
        return path
    return f"s3://{path}"


def remote_uri(path: str | Path | None) -> str | None:
    """The `s3://` URI `path` names (also after Path() squashed it to `s3:/`), else None."""
    text = str(path) if path is not None else ""
    if text.startswith("s3:/"):
        return "s3://" + text[len("s3:/") :].lstrip("/")
    return None


def bucket_filesystem_for(
    uri: str, environ: Mapping[str, str] | None = None
) -> tuple[str, S3FileSystem]:
    """(pyarrow path, filesystem) for an `s3://` URI in the configured bucket."""
    bucket, key = parse_s3_uri(uri)
    config = load_b2_config(environ)
    if config is None:
        raise StorageConfigError(
            f"{uri} is on a bucket, but B2 is not configured to read it (B2_BUCKET, B2_ENDPOINT, "
            "B2_APPLICATION_KEY_ID, B2_APPLICATION_KEY)"
        )
    if config.bucket != bucket:
        raise StorageConfigError(f"{uri} is not in the configured bucket {config.bucket}")
    return f"{bucket}/{key.rstrip('/')}", s3_filesystem(config)


def fetch_tree(uri: str, dest: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Copy everything under the `s3://` folder `uri` into `dest` (files already there with
    the same size are kept), and return `dest`."""
    from pyarrow import fs

    source, filesystem = bucket_filesystem_for(uri, environ)
    dest = Path(dest)
    local = fs.LocalFileSystem()
    for info in filesystem.get_file_info(fs.FileSelector(source, recursive=True)):
        if info.type != fs.FileType.File:
            continue
        target = dest / info.path[len(source) :].lstrip("/")
        if target.is_file() and target.stat().st_size == info.size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.copy_files(
            info.path, str(target), source_filesystem=filesystem, destination_filesystem=local
        )
    return dest
