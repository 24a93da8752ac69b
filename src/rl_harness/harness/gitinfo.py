"""Git identity of a working tree (commit, branch, dirty state, diff hash), via the git CLI."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl_harness.harness.layout import MANIFEST_NAME
from rl_harness.harness.redaction import redact_url


@dataclass(frozen=True)
class GitIdentity:
    root: str
    commit: str | None
    branch: str | None
    dirty: bool
    diff_sha256: str | None  # sha256 of working_tree_patch() when dirty
    untracked: tuple[str, ...]  # untracked, not ignored files (first MAX_LISTED)
    untracked_count: int
    remote_url: str | None
    patch: str = field(default="", repr=False)  # working_tree_patch() text, "" when clean
    run_records: int = 0  # changed paths inside run folders: not counted (see git_identity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "commit": self.commit,
            "branch": self.branch,
            "dirty": self.dirty,
            "diff_sha256": self.diff_sha256,
            "untracked": list(self.untracked),
            "untracked_count": self.untracked_count,
            "remote_url": self.remote_url,
            "run_records_not_counted": self.run_records,
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


MAX_LISTED = 200
# Untracked code and config is part of what ran (a new experiment.py before its first
# commit); other untracked files (earlier runs' results) are listed, not patched.
PATCHED_UNTRACKED_SUFFIXES = (".py", ".toml", ".cfg", ".ini", ".yaml", ".yml")
MAX_PATCHED_BYTES = 256 * 1024


def _untracked(root: Path) -> list[str]:
    out = _git(root, "ls-files", "--others", "--exclude-standard", "-z") or ""
    return sorted(name for name in out.split("\0") if name)


def _changed(root: Path) -> list[str]:
    """Every path `git status` reports (tracked changes, untracked files; both sides of a
    rename), relative to the root."""
    out = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all") or ""
    paths, entries = [], iter(out.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy: the next entry is its source
            paths.append(next(entries, ""))
    return [p for p in paths if p]


def run_folder(root: Path, relative: str, committed: frozenset[str] = frozenset()) -> str | None:
    """The run folder (one holding a run_manifest.json: a run's results/<run-id>/) that
    holds `relative`, relative to `root`; None when it lies outside every run folder.
    `committed`: run folders HEAD holds (`committed_run_folders`), so that a committed run
    folder deleted or moved away in the working tree still counts as records."""
    parts = Path(relative).parts
    for depth in range(1, len(parts)):
        folder = Path(*parts[:depth])
        if folder.as_posix() in committed or (Path(root) / folder / MANIFEST_NAME).is_file():
            return folder.as_posix()
    return None


def committed_run_folders(root: Path) -> frozenset[str]:
    """The folders holding a run_manifest.json in HEAD, relative to the root."""
    out = _git(root, "ls-tree", "-r", "-z", "--name-only", "HEAD") or ""
    return frozenset(
        Path(name).parent.as_posix()
        for name in out.split("\0")
        if name and Path(name).name == MANIFEST_NAME
    )


def working_tree_patch(
    root: Path, untracked: list[str] | None = None, excluded: list[str] | None = None
) -> str:
    """`git diff HEAD` plus untracked code files as additions: what differs from HEAD,
    less the folders in `excluded` (run folders: outputs, not what ran)."""
    root = Path(root)
    spec = ["--", ".", *(f":(exclude){folder}" for folder in excluded or [])]
    parts = [_git(root, "diff", "HEAD", "--binary", *(spec if excluded else [])) or ""]
    for name in _untracked(root) if untracked is None else untracked:
        path = root / name
        if path.suffix in PATCHED_UNTRACKED_SUFFIXES and path.stat().st_size <= MAX_PATCHED_BYTES:
            # `git diff --no-index` exits 1 when files differ, so read its output directly.
            out = subprocess.run(
                ["git", "-C", str(root), "diff", "--no-index", "--binary", "--", "/dev/null", name],
                capture_output=True,
                text=True,
                timeout=30,
            )
            parts.append(out.stdout)
    return "".join(parts)


def git_identity(path: Path) -> GitIdentity | None:
    """The identity of the repo holding `path`; None when `path` is not inside a git repo.

    What counts as dirty: any change `git status` reports (a tracked file modified, staged,
    deleted or renamed; an untracked, not ignored file) EXCEPT inside a run folder (a folder
    holding a run_manifest.json, i.e. results/<run-id>/ of this or another run, committed
    or not): those are records a run wrote, not code or data it read, so another run's
    uncommitted results never make a run dirty, nor does a committed run folder deleted or
    moved away (HEAD holds its manifest). They are left out of the patch too, and
    counted in `run_records`. Everything else counts, a new experiment.py first of all."""
    root = find_git_root(path)
    if root is None:
        return None
    commit = (_git(root, "rev-parse", "HEAD") or "").strip() or None
    branch = (_git(root, "rev-parse", "--abbrev-ref", "HEAD") or "").strip() or None
    folders = {name: run_folder(root, name) for name in _changed(root)}
    committed: frozenset[str] = frozenset()
    if commit and None in folders.values():
        # Only then list HEAD's tree: a change outside every run folder on disk may lie in a
        # committed run folder deleted or moved away.
        committed = committed_run_folders(root)
        folders = {
            name: folder or run_folder(root, name, committed) for name, folder in folders.items()
        }
    counted = [name for name, folder in folders.items() if folder is None]
    runs = sorted({folder for folder in folders.values() if folder is not None})
    untracked = [name for name in _untracked(root) if run_folder(root, name, committed) is None]
    diff = working_tree_patch(root, untracked, runs) if counted and commit else ""
    remote = (_git(root, "config", "--get", "remote.origin.url") or "").strip() or None
    remote = redact_url(remote) if remote else None  # https://user:TOKEN@host: no token
    return GitIdentity(
        root=str(root),
        commit=commit,
        branch=branch,
        dirty=bool(counted),
        diff_sha256=hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        untracked=tuple(untracked[:MAX_LISTED]),
        untracked_count=len(untracked),
        remote_url=remote,
        patch=diff,
        run_records=len(folders) - len(counted),
    )
