"""A real tiny run, made once per session through the CLI: GRU PPO on MESS3, 2 iterations."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from rl_harness.cli import main as cli_main

EPISODE_LENGTH = 16
ENV_CONFIG = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "episode_length": EPISODE_LENGTH,
    "token_window": 1,
    "info": ["token", "belief"],
}

TINY_RECIPE = f"""
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness import run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import GRUActorCritic

ENV_CONFIG = {ENV_CONFIG!r}


def run(context):
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=ENV_CONFIG)
        .env_runners(
            num_envs_per_env_runner=2,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=32,
        )
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=2, lr=3e-3)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=GRUActorCritic, model_config={{"max_seq_len": 8, "hidden_size": 8}}
            )
        )
    )
    result = run_algorithm(config, context, stop=2, checkpoint_every=1)
    return {{"iterations": result.iterations}}
"""


@dataclass(frozen=True)
class TinyRun:
    experiment_dir: Path
    results_dir: Path  # results/<run-id>
    run_id: str


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, ray_session) -> TinyRun:
    leaf = tmp_path_factory.mktemp("tiny_study") / "leaf"
    leaf.mkdir()
    (leaf / "experiment.py").write_text(textwrap.dedent(TINY_RECIPE))
    code = cli_main([str(leaf / "experiment.py"), "--run-id", "tiny", "--no-upload-artifacts"])
    assert code == 0, (leaf / "results" / "tiny" / "error.txt").read_text()
    return TinyRun(leaf, leaf / "results" / "tiny", "tiny")
