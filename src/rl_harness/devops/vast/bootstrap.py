"""The script a rented box runs on start: clone, `uv sync`, run in tmux, push, destroy.

`render_bootstrap` writes the parameters as shell-quoted assignments above the static body
(`bootstrap_body.sh`). `pack_env` carries the script in the create request's env (gzip +
base64 chunks); the fixed `ONSTART` command reassembles and starts it on the box.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from dataclasses import dataclass, field
from importlib import resources

# vast's docs disagree on onstart: 4096 characters in the OpenAPI validation (4048 in its
# overview), 16 KB in the CLI guide. The fixed ONSTART stays under the strictest.
ONSTART_LIMIT = 4048
ENV_TOTAL_LIMIT = 32768  # vast: all env values together
CHUNK = 200  # under vast's 256 per env value
CHUNK_PREFIX = "RLH_BOOT_"
_DIR_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class BootstrapParams:
    label: str
    vast_url: str
    library_url: str
    library_commit: str
    library_dir: str  # sibling folder names: what the experiment repo's pyproject expects
    experiment_url: str
    experiment_commit: str
    experiment_dir: str
    same_repo: bool  # the experiments live inside the library repo (the bundled example)
    argv: tuple[str, ...]  # run as `uv run ARGV...` in the experiment repo
    seed: int | None
    results_branch: str
    deadline_s: int
    grace_s: int = 600
    upload_b2: bool = False
    secret_names: tuple[str, ...] = field(default_factory=tuple)  # env names, never values
    push_attempts: int = 8
    retry_sleep_s: int = 5
    poll_s: float = 2.0

    def __post_init__(self) -> None:
        for name in (self.library_dir, self.experiment_dir):
            if not _DIR_NAME.match(name):
                raise ValueError(f"bad folder name for a clone: {name!r}")
        if not _BRANCH.match(self.results_branch) or ".." in self.results_branch:
            raise ValueError(f"bad results branch name: {self.results_branch!r}")
        for commit in (self.library_commit, self.experiment_commit):
            if not re.fullmatch(r"[0-9a-f]{40}", commit):
                raise ValueError(f"expected a full 40-hex commit id, got {commit!r}")
        if not self.argv:
            raise ValueError("the run command is empty")
        if self.deadline_s <= 0 or self.grace_s < 0:
            raise ValueError("deadline must be positive and grace non-negative")
        for name in self.secret_names:
            if not _ENV_NAME.match(name):
                raise ValueError(f"bad environment variable name: {name!r}")


def _body() -> str:
    return resources.files(__package__).joinpath("bootstrap_body.sh").read_text("utf-8")


def render_bootstrap(params: BootstrapParams) -> str:
    """The full bash script for one box. Contains no secret values."""
    q = shlex.quote
    assignments = {
        "RLH_LABEL": params.label,
        "RLH_VAST_URL": params.vast_url.rstrip("/"),
        "RLH_LIB_URL": params.library_url,
        "RLH_LIB_COMMIT": params.library_commit,
        "RLH_LIB_DIR": params.library_dir,
        "RLH_EXP_URL": params.experiment_url,
        "RLH_EXP_COMMIT": params.experiment_commit,
        "RLH_EXP_DIR": params.experiment_dir,
        "RLH_SAME_REPO": "1" if params.same_repo else "0",
        "RLH_SEED": "" if params.seed is None else str(params.seed),
        "RLH_RESULTS_BRANCH": params.results_branch,
        "RLH_DEADLINE_S": str(int(params.deadline_s)),
        "RLH_GRACE_S": str(int(params.grace_s)),
        "RLH_UPLOAD_B2": "1" if params.upload_b2 else "0",
        "RLH_SECRET_NAMES": " ".join(params.secret_names),
        "RLH_PUSH_ATTEMPTS": str(int(params.push_attempts)),
        "RLH_RETRY_SLEEP_S": str(int(params.retry_sleep_s)),
        "RLH_POLL_S": repr(float(params.poll_s)),
    }
    lines = [
        "#!/usr/bin/env bash",
        f"# rl-harness vast bootstrap for {params.label} (generated; no secrets inside)",
        *(f"{name}={q(value)}" for name, value in assignments.items()),
        "RLH_ARGV=(" + " ".join(q(a) for a in params.argv) + ")",
        "",
    ]
    return "\n".join(lines) + _body()


def pack_env(script: str) -> dict[str, str]:
    """The script gzip + base64 encoded, in numbered chunks `RLH_BOOT_000`, `RLH_BOOT_001`...

    vast caps onstart at about 4 KB (too small for the script) and each env value at 256,
    but allows 32768 of env in all; the fixed ONSTART reassembles the chunks.
    """
    payload = base64.b64encode(gzip.compress(script.encode("utf-8"), mtime=0)).decode("ascii")
    chunks = [payload[i : i + CHUNK] for i in range(0, len(payload), CHUNK)]
    env = {f"{CHUNK_PREFIX}{i:03d}": chunk for i, chunk in enumerate(chunks)}
    if sum(len(k) + len(v) for k, v in env.items()) > ENV_TOTAL_LIMIT // 2:
        raise ValueError(f"the packed bootstrap is too large ({len(payload)} characters)")
    return env


def unpack_env(env: dict[str, str]) -> str:
    """The script back from the chunks (what ONSTART does on the box, for tests and dry-run)."""
    names = sorted(k for k in env if k.startswith(CHUNK_PREFIX))
    if not names:
        raise ValueError(f"no {CHUNK_PREFIX}* chunks in the environment")
    payload = "".join(env[k] for k in names)
    return gzip.decompress(base64.b64decode(payload)).decode("utf-8")


# POSIX sh (onstart is not guaranteed bash): join the chunks in order, unpack, start the
# script detached (onstart must return), log to $RLH_WORK/bootstrap.log.
ONSTART = (
    'W="${RLH_WORK:-/root/rlh}"; mkdir -p "$W" && '
    f"env | sed -n 's/^{CHUNK_PREFIX}\\([0-9]*\\)=/\\1 /p' | sort -n | cut -d' ' -f2 | "
    "tr -d '\\n' | base64 -d | gunzip > \"$W/bootstrap.sh\" && "
    '(nohup bash "$W/bootstrap.sh" >> "$W/bootstrap.log" 2>&1 &)'
)
