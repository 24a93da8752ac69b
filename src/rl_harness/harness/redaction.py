"""Secret redaction for every log line, error message and record the library writes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "***REDACTED***"
# Variable names whose values are secrets wherever they appear.
_SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names mark them as secrets."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace every occurrence of each secret (longest first) with a marker."""
    for secret in sorted(
        {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True
    ):
        text = text.replace(secret, REDACTED)
    return text


def redact_env(
    text: str, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
) -> str:
    """Redact the secret-named environment values and any `extra` secrets from `text`."""
    return redact(text, [*secret_values(environ), *extra])
