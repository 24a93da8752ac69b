"""`run_tune` stopped by SIGTERM, in the fast suite: it raises RunInterrupted naming SIGTERM
(exit code 143, not Ctrl-C's 130) and the summary says `interrupted`.

In-process and cheap (CartPole, 64-step batches, num_env_runners=0); the CLI's process-group
SIGTERM under Tune with a resume is the slow test in test_signals.py.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from rl_harness.harness.context import make_context
from rl_harness.harness.interrupts import RunInterrupted
from rl_harness.harness.metrics import read_metrics
from rl_harness.harness.runners import run_tune

BUDGET = 40  # far more iterations than the run gets before the signal


def tiny_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )


class StrayTerm(Exception):
    """A SIGTERM that reached no run handler (the test's own guard caught it)."""


@pytest.fixture
def sigterm_guard():
    """SIGTERM outside run_tune's own handler fails the test instead of killing pytest."""

    def stray(signum, frame):
        raise StrayTerm("SIGTERM arrived outside run_tune's handler")

    previous = signal.signal(signal.SIGTERM, stray)
    yield stray
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_interrupts_run_tune_with_sigterm_and_143(ray_session, sigterm_guard, tmp_path):
    context = make_context(tmp_path, seed=4)
    metrics = context.results_dir / "metrics.jsonl"

    def sigterm_after_first_result() -> None:
        deadline = time.monotonic() + 300
        while not (metrics.exists() and metrics.read_text().strip()):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=sigterm_after_first_result, daemon=True).start()
    with pytest.raises(RunInterrupted) as raised:
        run_tune(tiny_config(), context, stop=BUDGET)
    assert raised.value.signal_name == "SIGTERM"
    assert raised.value.exit_code == 143

    summary = json.loads((context.results_dir / "summary.json").read_text())
    assert summary["runner"] == "tune" and summary["status"] == "interrupted"
    (trial,) = summary["trials"]
    assert trial["status"] == "interrupted"
    assert 1 <= trial["iterations"] < BUDGET
    assert trial["checkpoint"] is not None  # saved at the first result after the signal
    assert (context.artifacts_dir / trial["checkpoint"]).is_dir()
    rows = read_metrics(metrics)
    assert [r["training_iteration"] for r in rows] == list(range(1, trial["iterations"] + 1))
    # run_tune put back the SIGTERM handler it found.
    assert signal.getsignal(signal.SIGTERM) is sigterm_guard
