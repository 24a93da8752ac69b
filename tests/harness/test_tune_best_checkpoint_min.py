"""`run_tune(..., checkpoint_score_order="min")`: the best checkpoint is the lowest-scoring one,
and Tune keeps the lowest-scoring ones (the existing sweep test covers "max" only).

Scored by `training_iteration`, which every result reports: with "min" the first checkpoint
is the best, and `num_to_keep=2` keeps the two lowest-scoring ones (and the latest, which Tune
never deletes). Cheap: CartPole, 64-step batches, num_env_runners=0, 4 iterations.
"""

from __future__ import annotations

import json
from pathlib import Path

from rl_harness.harness.context import make_context
from rl_harness.harness.runners import run_tune


def tiny_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )


def test_min_order_picks_the_lowest_scoring_checkpoint(ray_session, tmp_path):
    context = make_context(tmp_path, seed=2)
    result = run_tune(
        tiny_config(),
        context,
        stop=4,
        checkpoint_every=1,
        num_to_keep=2,
        checkpoint_score_attribute="training_iteration",
        checkpoint_score_order="min",
    )
    (trial,) = result.trials
    assert trial.status == "completed" and trial.iterations == 4
    # The two kept by score: iterations 1 and 2 (with "max" they would be 3 and 4).
    names = [p.name for p in trial.checkpoints]
    assert names == ["checkpoint_000000", "checkpoint_000001"]
    assert trial.checkpoint_path.name == "checkpoint_000003"  # the last one
    assert trial.best_checkpoint is not None
    assert trial.best_checkpoint.name == "checkpoint_000000"  # the lowest score: iteration 1

    summary = json.loads((context.results_dir / "summary.json").read_text())
    (recorded,) = summary["trials"]
    assert Path(recorded["best_checkpoint"]).name == "checkpoint_000000"
    assert summary["checkpoint_score_attribute"] == "training_iteration"
