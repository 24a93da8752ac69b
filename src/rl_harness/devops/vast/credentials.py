"""Where the Vast API key comes from, which local secrets may be forwarded, and redaction."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from rl_harness.harness.redaction import redact, secret_values
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


class Redactor:
    """Removes the API key, forwarded values and secret-named env values from text."""

    def __init__(self, *secrets: str, environ: Mapping[str, str] | None = None):
        self._secrets = [s for s in secrets if s] + secret_values(environ)

    def add(self, *secrets: str) -> None:
        self._secrets.extend(s for s in secrets if s)

    def __call__(self, text: str) -> str:
        return redact(text, self._secrets)
