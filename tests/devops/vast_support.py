"""Constants and helpers shared by the vast tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

API_KEY = "vk-main-0123456789abcdef0123456789abcdef"  # the main key: must never leak
B2_KEY_ID = "b2kid-00112233445566"
B2_APP_KEY = "b2app-secret-ffeeddccbbaa99887766"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "tester",
    "GIT_AUTHOR_EMAIL": "tester@example.invalid",
    "GIT_COMMITTER_NAME": "tester",
    "GIT_COMMITTER_EMAIL": "tester@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout.strip()


MODULE = "experiments.demo.leaf.experiment"


def up_args(repos, *extra: str) -> list[str]:
    """`rl-harness vast up` of the demo recipe from the `repos` fixture, --max-hours 2."""
    return [
        "up",
        "--run",
        f"rl-harness {MODULE} --smoke",
        "--experiment-repo",
        str(repos.exp),
        "--library-repo",
        str(repos.lib),
        "--max-hours",
        "2",
        *extra,
    ]
