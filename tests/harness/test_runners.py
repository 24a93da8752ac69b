"""Both runners end to end on CartPole: records, checkpoints, resume, determinism, seed sweeps."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from rl_harness.harness.context import make_context
from rl_harness.harness.metrics import read_metrics, without_timings
from rl_harness.harness.runners import run_algorithm, run_tune


def tiny_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )


def _rows(context) -> list[dict]:
    return read_metrics(context.results_dir / "metrics.jsonl")


@pytest.fixture(scope="module")
def direct_runs(ray_session, tmp_path_factory):
    """Three 2-iteration runs: seed 5, seed 5 again, seed 6 (shared by several tests)."""
    base = tmp_path_factory.mktemp("direct")
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        context = make_context(base / name, seed=seed, smoke=True)
        runs[name] = (context, run_algorithm(tiny_config(), context, stop=2, checkpoint_every=1))
    return runs


def test_direct_runner_records_everything(direct_runs):
    context, result = direct_runs["a"]
    rows = _rows(context)
    assert [r["training_iteration"] for r in rows] == [1, 2]
    assert rows[-1]["num_env_steps_sampled_lifetime"] == 256
    for key in ("env_runners/episode_return_mean", "learners/default_policy/total_loss"):
        assert key in rows[0]
    assert not any("timer" in k or "throughput" in k for k in rows[0])
    summary = json.loads((context.results_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert summary["seed"] == 5 and summary["run_id"] == context.run_id
    assert [Path(p).name for p in summary["checkpoints"]] == ["iter_000001", "iter_000002"]
    # Recorded relative to artifacts/<run-id>/: the run folder can move.
    assert summary["final_checkpoint"] == "checkpoints/iter_000002"
    assert result.checkpoint_path == context.artifacts_dir / summary["final_checkpoint"]
    assert result.checkpoint_path.is_relative_to(context.artifacts_dir)
    assert (result.checkpoint_path / "rllib_checkpoint.json").exists()


def test_same_seed_reproduces_metrics_bit_for_bit(direct_runs):
    rows_a = [without_timings(r) for r in _rows(direct_runs["a"][0])]
    rows_b = [without_timings(r) for r in _rows(direct_runs["b"][0])]
    assert rows_a == rows_b
    rows_c = [without_timings(r) for r in _rows(direct_runs["c"][0])]
    assert rows_a != rows_c


def test_resume_continues_from_checkpoint(direct_runs, tmp_path: Path):
    first, result = direct_runs["a"]
    checkpoint = first.artifacts_dir / "checkpoints" / "iter_000001"
    resumed = make_context(tmp_path, seed=5, resume_from=checkpoint)
    run_algorithm(tiny_config(), resumed, stop=3)
    rows = _rows(resumed)
    assert [r["training_iteration"] for r in rows] == [2, 3]
    assert rows[0]["num_env_steps_sampled_lifetime"] == 256
    summary = json.loads((resumed.results_dir / "summary.json").read_text())
    assert summary["resumed_from"] == str(checkpoint) and summary["iterations"] == 3
    # A run folder resolves to its newest checkpoint.
    again = make_context(tmp_path, seed=5, resume_from=first.artifacts_dir)
    run_algorithm(tiny_config(), again, stop=3)
    assert [r["training_iteration"] for r in _rows(again)] == [3]


def test_stop_on_metric_threshold(ray_session, tmp_path: Path):
    context = make_context(tmp_path)
    run_algorithm(tiny_config(), context, stop={"num_env_steps_sampled_lifetime": 200})
    assert [r["training_iteration"] for r in _rows(context)] == [1, 2]


def test_bad_stop_rejected(tmp_path: Path):
    with pytest.raises(ValueError, match="stop must be at least one iteration, got 0"):
        run_algorithm(tiny_config(), make_context(tmp_path), stop=0)


def test_tune_seed_sweep_records_each_trial_seed(ray_session, ctrl_c_raises, tmp_path: Path):
    context = make_context(tmp_path, seed=9)
    result = run_tune(tiny_config(), context, stop=1, seeds=[11, 12])
    assert sorted(t.seed for t in result.trials) == [11, 12]
    assert all(t.status == "completed" and t.checkpoint_path for t in result.trials)
    assert result.experiment_path.is_relative_to(context.artifacts_dir)
    rows = _rows(context)
    assert sorted(r["seed"] for r in rows) == [11, 12]
    assert len({r["trial_id"] for r in rows}) == 2
    summary = json.loads((context.results_dir / "summary.json").read_text())
    assert summary["runner"] == "tune"
    assert sorted(t["seed"] for t in summary["trials"]) == [11, 12]
    # Different seeds, different learning: the trials' metrics differ.
    a, b = (without_timings(t.final_metrics) for t in result.trials)
    assert a != b

    # Resume: restore the Tune experiment into a new run; trials and seeds come back.
    resumed = make_context(tmp_path, seed=9, resume_from=result.experiment_path)
    again = run_tune(tiny_config(), resumed, stop=1, seeds=[11, 12])
    assert sorted(t.trial_id for t in again.trials) == sorted(t.trial_id for t in result.trials)
    assert sorted(t.seed for t in again.trials) == [11, 12]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_tune_ctrl_c_is_interrupted_and_handlers_restored(
    ray_session, ctrl_c_raises, tmp_path: Path
):
    context = make_context(tmp_path, seed=21)
    metrics = context.results_dir / "metrics.jsonl"

    def ctrl_c_after_first_result() -> None:
        deadline = time.monotonic() + 300
        while not metrics.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_after_first_result, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_tune(tiny_config(), context, stop=10_000)
    summary = json.loads((context.results_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    # Without seeds, the trial runs with the context's seed.
    assert [t["seed"] for t in summary["trials"]] == [21]
    assert {r["seed"] for r in _rows(context)} == {21}
    # Tune's own Ctrl-C handler must not outlive the run.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # Nor may the Ctrl-C itself: the next run in this process (a notebook) trains to its end.
    try:
        after = run_algorithm(tiny_config(), make_context(tmp_path, seed=22), stop=2)
    except KeyboardInterrupt as stale:  # would otherwise abort the whole pytest session
        pytest.fail(f"the earlier run's Ctrl-C stopped this one: {stale!r}")
    assert after.iterations == 2
