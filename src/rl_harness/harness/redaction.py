"""Secret redaction for every log line, error message and record the library writes.

Two kinds of secret: values of secret-named environment variables (and any the caller knows),
and credentials inside URLs (`https://user:TOKEN@host/...`, `?access_token=...`), which
`redact` strips from every URL in the text whatever else it is given. devops imports this
module (devops may import harness; harness may not import devops).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***REDACTED***"
# Variable names whose values are secrets wherever they appear.
_SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]+")
# Query parameters that carry credentials (OAuth tokens, API keys, presigned signatures).
_SECRET_PARAM = re.compile(
    r"(token|key|secret|passw|pwd|sig|signature|auth|credential|session)", re.IGNORECASE
)
_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")


def redact_url(url: str) -> str:
    """`url` without credentials: userinfo dropped (ssh keeps a bare user name such as
    `git@`), secret-named query values replaced. Anything that is not a URL is returned as is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        bare_ssh_user = parts.scheme.lower() in _SSH_SCHEMES and ":" not in userinfo
        netloc = netloc if bare_ssh_user else host
    query = "&".join(
        f"{piece.split('=', 1)[0]}={REDACTED}"
        if "=" in piece and _SECRET_PARAM.search(piece.split("=", 1)[0])
        else piece
        for piece in parts.query.split("&")
    )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_urls(text: str) -> str:
    """Strip credentials from every URL in `text` (see `redact_url`)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names mark them as secrets."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Strip URL credentials, then replace each secret (longest first) with a marker."""
    text = redact_urls(text)
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


def redact_record(
    obj: Any, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
) -> Any:
    """A copy of a JSON-like record with every string passed through `redact_env` (with the
    `extra` secrets too)."""
    secrets = [*secret_values(environ), *extra]

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, Mapping):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [clean(item) for item in value]
        return value

    return clean(obj)
