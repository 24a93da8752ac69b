"""Rerun a flagship memory-point run's analysis on its recorded checkpoints after the in-run
analysis failed (the interventions stage: warm-up actions not cut), at this checkout's commit.
Writes probe_metrics.json & co (analysis.analyze), result.json (analysis.summary) and
analysis_rerun.json (what ran, when, at which commit, why); keeps error.txt as the in-run one.

Run from the library checkout whose analysis should be used:
    uv run python examples/rl-experiments/experiments/mess3_belief_geometry/rerun_analysis.py \
        <leaf>/results/<run-id>
It made the two memory-point seed-0 records at eb83932 (their analysis_rerun.json). Checked by
hand on a smoke run (result.json equal to the in-run one but for its wall time); no test in
the suite: issue 48's `rl-harness analyze` is meant to replace it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from experiments.mess3_belief_geometry import analysis
from experiments.mess3_belief_geometry.next_token_aux.experiment import AUX_WEIGHT
from experiments.mess3_belief_geometry.spec import module_spec
from rl_harness.analysis import reopen_run

run_dir = Path(sys.argv[1]).resolve()
label = run_dir.parent.parent.name
reopened = reopen_run(run_dir, allow_changes=True)
context = reopened.context
plan = context.settings
started = time.time()
extra = {"aux_weight": AUX_WEIGHT} if label.startswith("next_token_aux") else {}
record = analysis.analyze(
    context, label=label, module_spec=module_spec(), plan=plan, interventions=True, **extra
)
iterations = sum(1 for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line)
result = analysis.summary(SimpleNamespace(iterations=iterations), record)
(run_dir / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout
dirty = subprocess.run(
    ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True
).stdout
(run_dir / "analysis_rerun.json").write_text(
    json.dumps(
        {
            "why": "the in-run analysis failed at its interventions stage (error.txt: warm-up "
            "actions of 256 episodes replayed with 64 episodes' observations); training had "
            "completed and every checkpoint was kept",
            "analysis_library_commit": commit.strip(),
            "src_uncommitted_changes": bool(dirty.strip()),
            "training_library_commit": reopened.record.manifest.get("library", {}).get("commit")
            if isinstance(reopened.record.manifest, dict)
            else None,
            "differences_from_the_run": list(reopened.differences),
            "started_utc": datetime.fromtimestamp(started, UTC).isoformat(),
            "seconds": round(time.time() - started, 1),
            "iterations": iterations,
            "final_checkpoint": str(reopened.final_checkpoint.path)
            if reopened.final_checkpoint
            else None,
        },
        indent=2,
    )
    + "\n"
)
print(f"done {run_dir.name} in {time.time() - started:.0f} s")
