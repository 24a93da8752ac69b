"""Local paths and URIs: a URI (s3://, gs://, http(s)://, ...) is kept as text, never a Path.

`Path("s3://bucket/key")` squashes the double slash (`s3:/bucket/key`), and that mangled form
used to reach manifests and summaries. Everything that may hold either kind goes through
`path_or_uri`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# Schemes whose URIs a Path may already have squashed to `scheme:/...`: repaired on the way in.
_SQUASHED = re.compile(r"^(s3|gs|gcs|http|https|hdfs|abfs|abfss|az):/(?!/)", re.IGNORECASE)

Location = Path | str  # a local path, or a URI kept as text


def is_uri(value: object) -> bool:
    """True for text such as `s3://b/k` or `https://h/p` (a scheme followed by `://`)."""
    return isinstance(value, str) and _URI.match(value) is not None


def path_or_uri(value: str | os.PathLike[str]) -> Location:
    """A URI as text (a squashed `s3:/b/k` repaired to `s3://b/k`), anything else a Path."""
    text = os.fspath(value)
    repaired = _SQUASHED.sub(lambda m: f"{m.group(1)}://", text, count=1)
    return repaired if is_uri(repaired) else Path(text)


def location_text(value: Location | None) -> str | None:
    """How a location is recorded: the URI itself, or the path as text."""
    return None if value is None else str(path_or_uri(value))
