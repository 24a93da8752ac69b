"""Runners: a direct `algo.train()` loop owned by the harness (`direct.py`), and Tune for
sweeps (`tune.py`); what both share is in `common.py`.

Both seed from the context, record the resolved config (results/<run-id>/config.json; each
Tune trial's in its summary record), append compact per-iteration metrics to
results/<run-id>/metrics.jsonl with a progress line (env steps/s, ETA), keep checkpoints
under artifacts/<run-id>/ on a `CheckpointSchedule` with a row per checkpoint in
results/<run-id>/checkpoints.jsonl, and write results/<run-id>/summary.json (file names and
checkpoint naming: layout.py).
"""

from rl_harness.harness.runners.common import normalize_stop, should_stop
from rl_harness.harness.runners.direct import DirectSummary, RunResult, run_algorithm
from rl_harness.harness.runners.tune import TrialRecord, TuneRunResult, TuneSummary, run_tune

__all__ = [
    "DirectSummary",
    "RunResult",
    "TrialRecord",
    "TuneRunResult",
    "TuneSummary",
    "normalize_stop",
    "run_algorithm",
    "run_tune",
    "should_stop",
]
