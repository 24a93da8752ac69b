"""Where the Vast API key comes from, which local secrets may be forwarded, and redaction."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl_harness.harness.redaction import REDACTED, redact, redact_url, secret_values
from rl_harness.harness.storage.config import load_b2_config

API_KEY_ENV = "VAST_API_KEY"
# The official vastai CLI stores its key here (`vastai set api-key`); reuse it when present.
DEFAULT_KEY_FILE = Path("~/.config/vastai/vast_api_key")
# Forwarded by --forward-git: a token for https clone/push, read from the first one set.
GIT_TOKEN_SOURCES = ("RLH_GIT_TOKEN", "GIT_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
GIT_TOKEN_ON_BOX = "RLH_GIT_TOKEN"


class MissingAPIKey(RuntimeError):
    pass


def load_api_key(environ: Mapping[str, str] | None = None, key_file: Path | None = None) -> str:
    """$VAST_API_KEY, else the vastai CLI's key file. Never taken from argv (visible in `ps`)."""
    env = os.environ if environ is None else environ
    key = env.get(API_KEY_ENV, "").strip()
    if key:
        return key
    path = (key_file or DEFAULT_KEY_FILE).expanduser()
    if path.is_file():
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return key
    raise MissingAPIKey(
        f"no vast.ai API key: set ${API_KEY_ENV} or run `vastai set api-key` (writes {path})"
    )


def forwarded_env(
    environ: Mapping[str, str], *, forward_b2: bool, forward_git: bool
) -> dict[str, str]:
    """The secrets a box receives (in the create request's env), only those asked for."""
    out: dict[str, str] = {}
    if forward_b2:
        # The harness's own B2 settings (env or RL_HARNESS_B2_ENV_FILE), as plain variables,
        # so a run on the box mirrors its artifacts just as it would here.
        config = load_b2_config(environ)
        if config is None:
            raise ValueError("--forward-b2 given but B2 is not configured here (no B2_BUCKET)")
        out.update(
            B2_BUCKET=config.bucket,
            B2_ENDPOINT=config.endpoint,
            B2_APPLICATION_KEY_ID=config.key_id,
            B2_APPLICATION_KEY=config.application_key,
            AWS_REGION=config.region,
        )
        if config.prefix:
            out["B2_PREFIX"] = config.prefix
    if forward_git:
        token = next((environ[k] for k in GIT_TOKEN_SOURCES if environ.get(k)), None)
        if token is None:
            raise ValueError(
                "--forward-git given but none of " + ", ".join(GIT_TOKEN_SOURCES) + " is set"
            )
        out[GIT_TOKEN_ON_BOX] = token
    if API_KEY_ENV in out:  # belt and braces: the main key never travels to a box
        del out[API_KEY_ENV]
    return out


# Field names of vast's answers whose values are credentials: `instance_api_key` (create),
# `api_key`, `jupyter_token`, forwarded `*_KEY` / `*_TOKEN` env entries, passwords.
_KEY_LIKE = re.compile(r"(key|token|secret|passw|credential)", re.IGNORECASE)


_PAGE_CURSORS = frozenset({"next_token", "after_token"})  # v1 paging, not credentials


def is_key_like(name: str) -> bool:
    return name not in _PAGE_CURSORS and bool(_KEY_LIKE.search(name))


def _env_pair(item: Any) -> bool:
    return isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)


def scrub(value: Any) -> Any:
    """A copy of a vast answer with the value of every key-like field replaced; `extra_env`
    style `[name, value]` pairs are scrubbed by name."""
    if isinstance(value, dict):
        return {
            k: REDACTED if is_key_like(str(k)) and isinstance(v, str) and v else scrub(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        if _env_pair(value) and is_key_like(value[0]) and isinstance(value[1], str):
            return [value[0], REDACTED]
        return [scrub(v) for v in value]
    return value


def scrubbed_values(value: Any) -> list[str]:
    """The string values `scrub` would replace (to redact them from any later text)."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if is_key_like(str(k)) and isinstance(v, str) and v:
                found.append(v)
            else:
                found.extend(scrubbed_values(v))
    elif isinstance(value, list):
        if _env_pair(value) and is_key_like(value[0]) and isinstance(value[1], str):
            found.append(value[1])
        else:
            for v in value:
                found.extend(scrubbed_values(v))
    return found


def url_has_credentials(url: str) -> bool:
    return redact_url(url) != url


class Redactor:
    """Removes the API key, forwarded values, secret-named env values and credentials in
    URLs from text."""

    def __init__(self, *secrets: str, environ: Mapping[str, str] | None = None):
        self._secrets = [s for s in secrets if s] + secret_values(environ)

    def add(self, *secrets: str) -> None:
        self._secrets.extend(s for s in secrets if s)

    def __call__(self, text: str) -> str:
        return redact(text, self._secrets)  # URL credentials included
