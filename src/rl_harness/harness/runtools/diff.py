"""What differs between two runs: the trained config first, then provenance fields, saved
patches and final metrics."""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from rl_harness.harness.configrecord import flat_config
from rl_harness.harness.metrics import flatten, without_timings
from rl_harness.harness.runtools.machine import (
    MachineDifference,
    machine_differences,
    machine_facts,
    machine_note,
)
from rl_harness.harness.runtools.records import RunRecord
from rl_harness.harness.runtools.show import number_label, short

# Manifest fields worth comparing (a name covers everything under it). Left out on purpose:
# run_id, timestamps, argv, artifact paths (they differ between any two runs), and the
# `dirty` flag and untracked lists (earlier runs' results make every tree "dirty");
# uncommitted code shows up as diff_sha256 instead.
PROVENANCE_FIELDS = (
    "status",
    "error.type",
    "experiment.module",
    "experiment.relative_dir",
    "experiment.source_sha256",
    "experiment_repo.root",
    "experiment_repo.remote_url",
    "experiment_repo.branch",
    "experiment_repo.commit",
    "experiment_repo.diff_sha256",
    "library.version",
    "library.path",
    "library.branch",
    "library.commit",
    "library.diff_sha256",
    "lockfile.path",
    "lockfile.sha256",
    "versions",
    "seed",
    "options",
    "hardware",
)
PATCHED_REPOS = ("experiment_repo", "library")


@dataclass(frozen=True)
class FieldDiff:
    key: str
    a: Any
    b: Any


@dataclass(frozen=True)
class PatchDiff:
    repo: str
    sha_a: str | None
    sha_b: str | None
    text_differs: bool
    changed_lines: int  # lines only in one of the two patches


@dataclass
class RunDiff:
    config: list[FieldDiff] = field(default_factory=list)  # config.json, dotted keys
    config_equal: int = 0
    config_missing: list[str] = field(default_factory=list)  # "a" / "b": no config.json
    provenance: list[FieldDiff] = field(default_factory=list)
    provenance_equal: int = 0
    patches: list[PatchDiff] = field(default_factory=list)
    metrics: list[FieldDiff] = field(default_factory=list)
    metrics_equal: int = 0
    manifest_missing: list[str] = field(default_factory=list)  # "a" / "b": unreadable
    # Machine facts that change float rounding (runtools/machine.py), also among `provenance`.
    machine: list[MachineDifference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Nothing differs; never when a manifest could not be read (nothing to compare)."""
        return not (
            self.manifest_missing
            or self.config
            or self.provenance
            or self.metrics
            or any(p.text_differs for p in self.patches)
        )


def _selected(manifest: dict[str, Any]) -> dict[str, Any]:
    flat = flatten(manifest, "")
    flat = {key.replace("/", "."): value for key, value in flat.items()}
    picked = {}
    for key, value in flat.items():
        if any(key == name or key.startswith(name + ".") for name in PROVENANCE_FIELDS):
            picked[key] = json.dumps(value, sort_keys=True) if isinstance(value, list) else value
    return picked


def _compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[FieldDiff], int]:
    diffs, equal = [], 0
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            equal += 1
        else:
            diffs.append(FieldDiff(key, a.get(key), b.get(key)))
    return diffs, equal


def _patch_diff(run_a: RunRecord, run_b: RunRecord, repo: str) -> PatchDiff | None:
    sha_a = run_a.section(repo).get("diff_sha256")
    sha_b = run_b.section(repo).get("diff_sha256")
    if sha_a is None and sha_b is None:
        return None
    text_a, text_b = run_a.patch_text(repo) or "", run_b.patch_text(repo) or ""
    lines = difflib.ndiff(text_a.splitlines(), text_b.splitlines())
    changed = sum(1 for line in lines if line[:2] in ("- ", "+ "))
    return PatchDiff(repo, sha_a, sha_b, text_a != text_b, changed)


def diff_runs(run_a: RunRecord, run_b: RunRecord) -> RunDiff:
    result = RunDiff()
    configs = {"a": run_a.config, "b": run_b.config}
    result.config_missing = [side for side, config in configs.items() if config is None]
    if len(result.config_missing) < 2:
        result.config, result.config_equal = _compare(
            flat_config(run_a.config or {}), flat_config(run_b.config or {})
        )
    manifests = {"a": run_a.manifest, "b": run_b.manifest}
    result.manifest_missing = [side for side, m in manifests.items() if m is None]
    if run_a.manifest is not None and run_b.manifest is not None:  # none missing
        result.provenance, result.provenance_equal = _compare(
            _selected(run_a.manifest), _selected(run_b.manifest)
        )
        result.machine = machine_differences(
            machine_facts(run_a.manifest), machine_facts(run_b.manifest)
        )
    for repo in PATCHED_REPOS:
        patch = _patch_diff(run_a, run_b, repo)
        if patch is not None:
            result.patches.append(patch)
    result.metrics, result.metrics_equal = _compare(
        without_timings(run_a.final_metrics), without_timings(run_b.final_metrics)
    )
    return result


def _delta(a: Any, b: Any) -> str:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers or not (math.isfinite(a) and math.isfinite(b)):
        return ""
    return number_label(b - a)


def _value(value: Any) -> str:
    text = number_label(value) if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."


def diff_text(run_a: RunRecord, run_b: RunRecord, result: RunDiff) -> str:
    lines = [f"a: {run_a.run_id}  ({run_a.path})", f"b: {run_b.run_id}  ({run_b.path})"]
    note = machine_note(result.machine)
    if note is not None:  # first: it explains metrics that differ with nothing else changed
        lines.append(f"note: {note}")
    width = max([len(d.key) for d in result.config + result.provenance + result.metrics] + [10])
    if len(result.config_missing) == 2:
        lines.append("config: neither run has config.json")
    else:
        missing = "".join(f"; run {side} has no config.json" for side in result.config_missing)
        lines.append(f"config: {len(result.config)} differ, {result.config_equal} equal{missing}")
        lines += [f"  {d.key:<{width}}  {_value(d.a)}  ->  {_value(d.b)}" for d in result.config]
    if result.manifest_missing:
        sides = " and ".join(f"run {side}" for side in result.manifest_missing)
        lines.append(f"provenance: not compared ({sides}: manifest could not be read)")
    else:
        lines.append(
            f"provenance: {len(result.provenance)} differ, {result.provenance_equal} equal"
        )
    lines += [f"  {d.key:<{width}}  {_value(d.a)}  ->  {_value(d.b)}" for d in result.provenance]
    for patch in result.patches:
        text = "text differs" if patch.text_differs else "text identical"
        if patch.text_differs:
            text += f" ({patch.changed_lines} lines differ)"
        lines.append(
            f"  {patch.repo} patch: a {short(patch.sha_a, 12)}  b {short(patch.sha_b, 12)}  {text}"
        )
    lines.append(
        f"final metrics (timing keys ignored): {len(result.metrics)} differ, "
        f"{result.metrics_equal} equal"
    )
    if result.metrics:
        lines.append(f"  {'key':<{width}}  a  ->  b  (delta)")
    for d in result.metrics:
        delta = _delta(d.a, d.b)
        lines.append(
            f"  {d.key:<{width}}  {_value(d.a)}  ->  {_value(d.b)}"
            + (f"  ({delta})" if delta else "")
        )
    return "\n".join(lines)
