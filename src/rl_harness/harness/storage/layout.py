"""Object keys and URIs: `{prefix}/{experiment dir relative to its repo}/{run-id}/{file path}`."""

from __future__ import annotations

from pathlib import Path

from rl_harness.harness.layout import REMOTE_INDEX_NAME

INDEX_FILE = REMOTE_INDEX_NAME  # in results/<run-id>/ (its name is harness/layout.py's)


def clean_relative(path: str, what: str) -> str:
    """A relative posix path with no empty, '.' or '..' parts; ValueError otherwise."""
    if "\\" in path:
        raise ValueError(f"{what} must use '/' separators: {path!r}")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{what} must not contain '..': {path!r}")
    return "/".join(parts)


def object_key(prefix: str, run_path: str, relative_file: str) -> str:
    return "/".join(part for part in (prefix.strip("/"), run_path, relative_file) if part)


def s3_uri(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key or key prefix) from `s3://bucket/some/key`."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"URI names no bucket: {uri!r}")
    return bucket, key


def local_files(root: Path) -> list[tuple[str, Path]]:
    """(relative posix path, path) of every file under `root`, sorted; file symlinks included,
    directory symlinks not followed."""
    root = Path(root)
    found = [
        (path.relative_to(root).as_posix(), path) for path in root.rglob("*") if path.is_file()
    ]
    return sorted(found)
