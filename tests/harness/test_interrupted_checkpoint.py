"""An interrupted direct run still saves its final checkpoint, and that checkpoint resumes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rl_harness.harness.context import make_context
from rl_harness.harness.metrics import read_metrics
from rl_harness.harness.runners import run_algorithm


def tiny_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )


def test_ctrl_c_after_first_iteration_keeps_the_final_checkpoint(
    ray_session, ctrl_c_raises, tmp_path: Path
):
    context = make_context(tmp_path, seed=3)

    def ctrl_c(algo, _result) -> None:
        # A real SIGINT to this process: Python's handler raises KeyboardInterrupt here.
        os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        run_algorithm(tiny_config(), context, stop=1000, on_iteration=ctrl_c)

    summary = json.loads((context.results_dir / "summary.json").read_text())
    final = context.artifacts_dir / "checkpoints" / "iter_000001"
    assert summary["status"] == "interrupted" and summary["iterations"] == 1
    assert summary["checkpoints"] == [final.relative_to(context.artifacts_dir).as_posix()]
    assert context.artifacts_dir / summary["final_checkpoint"] == final
    assert (final / "rllib_checkpoint.json").is_file()

    # The checkpoint is a usable one: a resumed run continues at iteration 2.
    resumed = make_context(tmp_path, seed=3, resume_from=context.artifacts_dir)
    result = run_algorithm(tiny_config(), resumed, stop=2)
    rows = read_metrics(resumed.results_dir / "metrics.jsonl")
    assert [r["training_iteration"] for r in rows] == [2]
    assert result.iterations == 2
