"""Git identity of a working tree (commit, branch, dirty state, diff hash), via the git CLI."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitIdentity:
    root: str
    commit: str | None
    branch: str | None
    dirty: bool
    diff_sha256: str | None  # sha256 of `git diff HEAD` (tracked changes) when dirty
    untracked: tuple[str, ...]  # untracked, not ignored files
    remote_url: str | None

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "commit": self.commit,
            "branch": self.branch,
            "dirty": self.dirty,
            "diff_sha256": self.diff_sha256,
            "untracked": list(self.untracked),
            "remote_url": self.remote_url,
        }


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return out.stdout


def find_git_root(path: Path) -> Path | None:
    """The top of the git work tree holding `path`, or None when it is not in one."""
    path = Path(path).resolve()
    start = path if path.is_dir() else path.parent
    out = _git(start, "rev-parse", "--show-toplevel")
    return Path(out.strip()) if out else None


def git_diff_head(root: Path) -> str:
    """The patch of tracked changes against HEAD (binary-safe text)."""
    return _git(root, "diff", "HEAD", "--binary") or ""


def git_identity(path: Path) -> GitIdentity | None:
    """The identity of the repo holding `path`; None when `path` is not inside a git repo."""
    root = find_git_root(path)
    if root is None:
        return None
    commit = (_git(root, "rev-parse", "HEAD") or "").strip() or None
    branch = (_git(root, "rev-parse", "--abbrev-ref", "HEAD") or "").strip() or None
    status = _git(root, "status", "--porcelain", "--untracked-files=all") or ""
    untracked = tuple(line[3:] for line in status.splitlines() if line.startswith("?? "))
    tracked_changes = [line for line in status.splitlines() if not line.startswith("?? ")]
    diff = git_diff_head(root) if tracked_changes and commit else ""
    remote = (_git(root, "config", "--get", "remote.origin.url") or "").strip() or None
    return GitIdentity(
        root=str(root),
        commit=commit,
        branch=branch,
        dirty=bool(status.strip()),
        diff_sha256=hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        untracked=untracked,
        remote_url=remote,
    )
