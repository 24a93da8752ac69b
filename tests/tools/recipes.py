"""Recipe sources for the run-tool tests: no Ray, each run takes well under a second."""

# Deterministic in the seed; the timing key is wall-clock and must not matter.
SEEDED = """
import time
from rl_harness.harness.metrics import MetricsLog
from rl_harness.seeding import stream_rng

def run(context):
    rng = stream_rng(context.seed, "demo")
    log = MetricsLog(context.results_dir / "metrics.jsonl")
    for i in range(3):
        log.append({
            "training_iteration": i + 1,
            "env_runners/episode_return_mean": float(rng.normal(20.0, 5.0)),
            "learners/default_policy/total_loss": float(rng.random()),
            "time_this_iter_s": time.perf_counter(),
        })
    return {"iterations": 3}
"""

# Not deterministic: every run draws fresh entropy from the OS.
URANDOM = """
import os
from rl_harness.harness.metrics import MetricsLog

def run(context):
    log = MetricsLog(context.results_dir / "metrics.jsonl")
    for i in range(2):
        noise = int.from_bytes(os.urandom(4), "little") / 2**32
        log.append({"training_iteration": i + 1, "env_runners/episode_return_mean": noise})
"""

# Equal up to ~1e-12 relative: within the default tolerance, not identical.
JITTER = """
import os
from rl_harness.harness.metrics import MetricsLog

def run(context):
    jitter = int.from_bytes(os.urandom(4), "little") / 2**32 * 1e-12
    MetricsLog(context.results_dir / "metrics.jsonl").append(
        {"training_iteration": 1, "env_runners/episode_return_mean": 100.0 * (1.0 + jitter)}
    )
"""

NO_METRICS = """
def run(context):
    return {"ok": True}
"""

# Completes once; any later run beside it fails (a reproduction that breaks).
FAILS_SECOND_TIME = """
from rl_harness.harness.metrics import MetricsLog

def run(context):
    if len(list(context.results_dir.parent.iterdir())) > 1:
        raise RuntimeError("a second run")
    MetricsLog(context.results_dir / "metrics.jsonl").append({"training_iteration": 1})
"""
