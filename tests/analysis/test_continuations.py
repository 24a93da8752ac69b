"""A `--resume-from` run links its parent; checkpoint readers follow the chain (step 0
kept) and `compare` counts the chain as one run. Two real CLI runs on one Ray session."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_harness.analysis import run_checkpoints
from rl_harness.analysis.comparison import compare_runs
from rl_harness.cli import main
from tests.tools.helpers import manifest, run_dirs, write_leaf

RECIPE = """
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import CheckpointSchedule, run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )
    stop = 3 if context.resume_from else 2
    schedule = CheckpointSchedule(at_start=True, every=1)
    result = run_algorithm(config, context, stop=stop, checkpoint_schedule=schedule)
    return {"iterations": result.iterations}
"""


@pytest.fixture(scope="module")
def chain(ray_session, tmp_path_factory):
    leaf = write_leaf(tmp_path_factory.mktemp("chain"), RECIPE)
    assert main([str(leaf), "--seed", "3"]) == 0
    (first,) = run_dirs(leaf)
    resume = Path(manifest(first)["artifacts"]["local"]) / "checkpoints" / "iter_000001"
    assert main([str(leaf), "--seed", "3", "--resume-from", str(resume)]) == 0
    return leaf, first, run_dirs(leaf)[-1]


def test_a_continuation_links_its_parent(chain):
    _, first, second = chain
    assert manifest(first)["parent"] is None
    parent = manifest(second)["parent"]
    assert parent["run_id"] == first.name
    assert Path(parent["results_dir"]) == first.resolve()
    assert parent["checkpoint"] == "checkpoints/iter_000001"
    assert parent["iteration"] == 1 and parent["env_steps"] == 64


def test_checkpoint_readers_follow_the_chain_from_step_0(chain):
    _, first, second = chain
    own = run_checkpoints(second, chain=False)
    assert [c.iteration for c in own] == [2, 3]  # a resumed run saves no step 0 of its own
    chained = run_checkpoints(second)
    assert [(c.iteration, c.env_steps) for c in chained] == [(0, 0), (1, 64), (2, 128), (3, 192)]
    # The first two are the parent's (its iteration 2, past the resume point, is not).
    assert [Path(c.path).parents[1].name for c in chained] == [first.name] * 2 + [second.name] * 2
    assert [c.iteration for c in run_checkpoints(first)] == [0, 1, 2]


def test_compare_counts_a_chain_as_one_run(chain):
    leaf, first, second = chain
    comparison = compare_runs([leaf.parent], ["training_iteration"])
    (arm,) = comparison.arms
    assert arm.n_runs == 1
    assert [e.run_id for e in comparison.runs] == [second.name]
    assert comparison.arms[0].metrics["training_iteration"].mean == 3
    assert any(first.name in note and "continuation" in note for note in comparison.notes)
