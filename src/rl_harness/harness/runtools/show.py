"""Human-readable views of runs: the `runs` table and one run's `show` page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl_harness.harness.console import text_table
from rl_harness.harness.metrics import flatten
from rl_harness.harness.results import Results, is_named
from rl_harness.harness.runtools.records import HEADLINE_METRIC, RunRecord

SHORT = 8  # characters of a commit or sha256 worth showing


def short(value: Any, width: int = SHORT) -> str:
    return "-" if value is None else str(value)[:width]


def commit_label(section: dict[str, Any]) -> str:
    """Short commit, with `*` when the run had uncommitted code changes (a saved patch)."""
    if not section.get("commit"):
        return "-"
    return short(section["commit"]) + ("*" if section.get("diff_sha256") else "")


def duration_label(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def number_label(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def experiment_label(record: RunRecord) -> str:
    """The module without its `.experiment` tail; the leaf folder for a bare file module."""
    experiment = record.section("experiment")
    module = str(experiment.get("module") or "-")
    if "." not in module:
        return str(experiment.get("relative_dir") or module)
    return module.removesuffix(".experiment")


RUNS_HEADER = ("run", "experiment", "status", "seed", "budget", "exp", "lib", "duration", "return")
UNCHECKED = "running?"  # recorded as running where this machine cannot check the process


def status_label(record: RunRecord) -> str:
    """`crashed` for a running record whose process is gone; `running?` when the process is
    on another host (or unrecorded) and cannot be checked from here; `-` when the manifest
    could not be read."""
    check = record.status_check
    if check is None:
        return "-"
    return UNCHECKED if check.unchecked else check.status


def runs_table(records: Sequence[RunRecord]) -> str:
    rows = [
        (
            record.run_id,
            experiment_label(record),
            status_label(record),
            number_label((record.manifest or {}).get("seed")),
            record.budget or "-",
            commit_label(record.section("experiment_repo")),
            commit_label(record.section("library")),
            duration_label((record.manifest or {}).get("duration_s")),
            number_label(record.headline),
        )
        for record in records
    ]
    notes = [
        f"{UNCHECKED} {record.run_id}: recorded as running; {check.note}"
        for record in records
        if (check := record.status_check) is not None and check.unchecked
    ]
    crashed = [r.run_id for r in records if r.status == "crashed" and r.recorded_status != r.status]
    if crashed:
        notes.append(
            f"crashed: {len(crashed)} run(s) recorded as running whose process is gone "
            "(`rl-harness runs --mark-crashed` records it)"
        )
    return "\n".join([text_table(RUNS_HEADER, rows), *notes])


def _repo_line(section: dict[str, Any]) -> str:
    if not section.get("commit"):
        return f"{section.get('root') or '-'} (not a git checkout)"
    state = "clean"
    if section.get("diff_sha256"):
        state = f"uncommitted changes, patch {section.get('patch_file')} "
        state += f"sha256 {short(section['diff_sha256'], 12)}"
    return f"{section.get('root')}  {section.get('branch')} @ {section['commit'][:12]}  ({state})"


def _memory(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else "-"


def show_text(record: RunRecord) -> str:
    if record.manifest is None:  # a lenient reader's unreadable manifest: what else is there
        lines = [
            f"run         {record.run_id}  [{status_label(record)}]",
            f"folder      {record.path}",
            "provenance  not shown (run_manifest.json could not be read)",
        ]
        return "\n".join(lines + _metrics_lines(record))
    m = record.manifest
    experiment = record.section("experiment")
    options = record.section("options")
    library = record.section("library")
    lockfile = record.section("lockfile")
    hardware = record.section("hardware")
    plan = hardware.get("plan") or {}
    versions = record.section("versions")
    gpus = ", ".join(g.get("name", "?") for g in hardware.get("gpus") or []) or "none"
    lines = [
        f"run         {record.run_id}  [{status_label(record)}]",
        f"folder      {record.path}",
        f"experiment  {experiment.get('module')}",
        f"source      {experiment.get('source_file')}  "
        f"sha256 {short(experiment.get('source_sha256'), 12)}",
        f"seed        {m.get('seed')}   budget {record.budget or '-'}   "
        f"smoke {options.get('smoke')}   "
        f"resume_from {options.get('resume_from') or '-'}",
        *_budget_lines(record),
        f"hardware    {plan.get('profile', options.get('hardware_profile'))}: "
        f"env runners {plan.get('num_env_runners')}, learners {plan.get('num_learners')}, "
        f"gpus/learner {plan.get('num_gpus_per_learner')}",
        f"exp repo    {_repo_line(record.section('experiment_repo'))}",
        f"library     rl-harness {library.get('version')}  "
        + (
            "(same repo as the experiment)"
            if library.get("same_repo_as_experiment")
            else _repo_line(library)
        ),
        f"lockfile    {lockfile.get('path') or '-'}  sha256 {short(lockfile.get('sha256'), 12)}",
        "versions    " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"host        {hardware.get('hostname')}  {hardware.get('os')}",
        f"cpu         {hardware.get('cpu_model')} x{hardware.get('cpu_count')}  "
        f"memory {_memory(hardware.get('memory_bytes'))}  gpus {gpus}",
        f"time        {m.get('started_at')} -> {m.get('ended_at') or '-'}  "
        f"({duration_label(m.get('duration_s'))})",
    ]
    check = record.status_check
    if check is not None and check.note is not None:
        recorded = "" if check.status == check.recorded else f" (the record says {check.recorded})"
        lines.append(f"status      {check.status}{recorded}: {check.note}")
    error = m.get("error")
    if isinstance(error, dict):
        where = f"  (see {error['traceback_file']})" if error.get("traceback_file") else ""
        lines.append(f"error       {error.get('type')}: {error.get('message')}{where}")
    return "\n".join(lines + _metrics_lines(record))


def _metrics_lines(record: RunRecord) -> list[str]:
    final = record.final_metrics
    rows = record.metrics_rows
    lines = [f"final metrics ({len(rows)} rows in metrics.jsonl):" if final else "no metrics"]
    lines += _key_values(final)
    if is_named(record.result):  # named metrics (results.py): each value by its name
        lines.append("result.json:")
        lines += _key_values({k: m.value for k, m in Results.from_json(record.result).items()})
    elif isinstance(record.result, dict):
        lines.append("result.json:")
        lines += _key_values(flatten(record.result))  # nested mappings as a/b keys
    return lines


def _budget_lines(record: RunRecord) -> list[str]:
    """The recorded budget settings, overrides marked (runs recorded before: none)."""
    budget = record.section("budget")
    settings = budget.get("settings")
    if not isinstance(settings, dict):
        return []
    overrides = budget.get("overrides") or {}
    cells = [f"{k}={v}{' (--set)' if k in overrides else ''}" for k, v in settings.items()]
    return ["settings    " + ", ".join(cells)]


def _key_values(values: dict[str, Any]) -> list[str]:
    width = max((len(key) for key in values), default=0)
    return [f"  {key:<{width}}  {number_label(values[key])}" for key in sorted(values)]


def show_json(record: RunRecord) -> dict[str, Any]:
    return {
        "path": str(record.path),
        "status": record.status,
        "status_note": record.status_check.note if record.status_check else None,
        "manifest": record.manifest,
        "final_metrics": record.final_metrics,
        "metrics_rows": len(record.metrics_rows),
        "headline": {HEADLINE_METRIC: record.headline},
        "summary": record.summary,
        "result": record.result,
        "config": record.config,
    }
