"""The run manifest, results/<run-id>/run_manifest.json: the one module that reads and
writes it.

Every write is redacted (`redaction.redact_record`): secret-named environment values, URL
credentials and any secrets the caller names never reach the file, whichever path writes
it: a run's start and end (`lifecycle.py`), `rl-harness runs --mark-crashed`
(`liveness.mark_crashed`) and `rl-harness upload` (`storage.upload.upload_run`). What a
manifest holds is built in `provenance.py`. `read_manifest` is for a read-modify-write of a
manifest known to exist; `load_manifest` for readers of any folder (the run tools'
`RunRecord`, the sweep's skip check, Tune's storage path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rl_harness.harness.atomic import RecordReadError, read_json, read_record, write_json_atomic
from rl_harness.harness.layout import MANIFEST_NAME
from rl_harness.harness.redaction import redact_record


def manifest_path(results_dir: Path) -> Path:
    return Path(results_dir) / MANIFEST_NAME


def read_manifest(results_dir: Path) -> dict[str, Any]:
    """The manifest of the run in `results_dir` (to update it and write it back)."""
    result: dict[str, Any] = read_json(manifest_path(results_dir))
    return result


def load_manifest(results_dir: Path) -> dict[str, Any] | None:
    """The manifest of any folder: None when it holds none; RecordReadError (one line naming
    the file) when it is not JSON, not UTF-8, unreadable or not a JSON object."""
    path = manifest_path(results_dir)
    if not path.is_file():
        return None
    manifest = read_record(path)
    if not isinstance(manifest, dict):
        raise RecordReadError(f"{path} does not hold a manifest object")
    return manifest


def write_manifest(
    results_dir: Path, manifest: Mapping[str, Any], *, secrets: Iterable[str] = ()
) -> None:
    """Write atomically, every string redacted (argv, options, URLs and error messages hold
    no secret); `secrets`: values the caller knows besides the environment's (a B2 key read
    from an env file, say)."""
    write_json_atomic(manifest_path(results_dir), redact_record(manifest, extra=secrets))
