"""config.json says what was trained; `diff` shows config differences first; `--log-to`
mirrors the config as each tracker's params; `compare` groups and filters arms by config keys.
Two real PPO runs of one leaf through the CLI, differing in seed and (by seed) in lr."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from rl_harness.analysis import RunArtifacts
from rl_harness.cli import main
from rl_harness.envs.hmm import ENV_ID
from rl_harness.harness.redaction import REDACTED
from tests.harness.test_log_to import mlflow_runs
from tests.harness.wandb_files import records

SECRET = "svc-secret-value-4242"  # an environment secret that reaches a config string
ENV_CONFIG = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "episode_length": 16,
    "token_window": 1,
}
RECIPE = f"""
import os

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness import run_algorithm
from rl_harness.envs.hmm import ENV_ID


def run(context):
    lr = 1e-3 if context.seed == 1 else 3e-3
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config={ENV_CONFIG!r})
        .training(
            train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1, lr=lr, gamma=0.95,
            learner_config_dict={{
                "tracker_api_key": "plain-looking-key-123",
                "api_keys": ["plain-looking-keys-456", "plain-looking-keys-457"],
                "auth_tokens": "plain-looking-tokens-789",
                "credentials": {{"service": "plain-looking-credentials-012", "retries": 3}},
                "authToken": "plain-looking-camel-345",
                "clientSecret": "plain-looking-camel-678",
                "endpoint": "https://svc.example/" + os.environ["SVC_TOKEN"],
            }},
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=DefaultPPOTorchRLModule, model_config={{"fcnet_hiddens": [8]}}
            )
        )
    )
    return {{"iterations": run_algorithm(config, context, stop=1).iterations}}
"""


@dataclass(frozen=True)
class Runs:
    leaf: Path
    a: Path  # seed 1, lr 0.001, mirrored with --log-to to all three trackers
    b: Path  # seed 2, lr 0.003
    mlflow_store: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_session) -> Runs:
    root = tmp_path_factory.mktemp("config_record")
    leaf = root / "study" / "leaf"
    leaf.mkdir(parents=True)
    (leaf / "experiment.py").write_text(textwrap.dedent(RECIPE))
    store = root / "mlruns"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SVC_TOKEN", SECRET)
        patch.setenv("MLFLOW_TRACKING_URI", f"file:{store}")
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        mirrors = ["--log-to", "tensorboard", "--log-to", "mlflow", "--log-to", "wandb"]
        for run_id, seed, extra in (("a", "1", mirrors), ("b", "2", [])):
            argv = [str(leaf / "experiment.py"), "--run-id", run_id, "--seed", seed, *extra]
            assert main([*argv, "--no-upload-artifacts"]) == 0
    return Runs(leaf, leaf / "results" / "a", leaf / "results" / "b", store)


def test_config_json_names_what_was_trained(runs):
    text = (runs.a / "config.json").read_text()
    config = json.loads(text)
    assert text == json.dumps(config, indent=2, sort_keys=True) + "\n"  # stable key order
    assert config["algorithm_class"] == "ray.rllib.algorithms.ppo.ppo.PPO"
    assert config["module"] == {
        "class": "ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module."
        "DefaultPPOTorchRLModule",
        "model_config": {"fcnet_hiddens": [8]},
    }
    assert config["env"] == ENV_ID and config["env_config"] == ENV_CONFIG
    assert (config["lr"], config["gamma"], config["seed"]) == (1e-3, 0.95, 1)
    assert (config["train_batch_size_per_learner"], config["minibatch_size"]) == (64, 32)
    assert config["_train_batch_size_per_learner"] == 64  # the raw to_dict() key beside it
    assert config["num_epochs"] == 1
    assert (config["num_env_runners"], config["num_learners"]) == (0, 0)  # cpu-local plan
    assert config["_rl_module_spec"]["module_class"] == config["module"]["class"]
    assert config["learner_class"].endswith("PPOTorchLearner")
    # secrets: a secret-named key's value (plural and camelCase names too), an environment
    # secret in a URL
    assert config["learner_config_dict"] == {
        "tracker_api_key": REDACTED,
        "api_keys": [REDACTED, REDACTED],
        "auth_tokens": REDACTED,
        "credentials": {"service": REDACTED, "retries": 3},
        "authToken": REDACTED,  # camelCase names are split into words too
        "clientSecret": REDACTED,
        "endpoint": f"https://svc.example/{REDACTED}",
    }
    assert SECRET not in text and "plain-looking" not in text
    assert RunArtifacts.open(runs.a).config == config


def test_diff_shows_config_differences_first(runs, capsys):
    capsys.readouterr()
    assert main(["diff", str(runs.a), str(runs.b)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("config: 2 differ, ")
    assert lines[3].split() == ["lr", "0.001", "->", "0.003"]
    assert lines[4].split() == ["seed", "1", "->", "2"]
    assert lines[5].startswith("provenance: ")


def test_log_to_mirrors_the_config_as_params(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    artifacts = runs.leaf / "artifacts" / "a"
    accumulator = EventAccumulator(str(artifacts / "tensorboard" / "a"))
    accumulator.Reload()
    (content,) = accumulator.PluginTagToContent("hparams").values()
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["lr"].number_value == 1e-3
    assert hparams["env_config.episode_length"].number_value == 16
    assert hparams["module.class"].string_value.endswith("DefaultPPOTorchRLModule")

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        _, (run,) = mlflow_runs(runs.mlflow_store)
    assert run.data.params["lr"] == "0.001" and run.data.params["seed"] == "1"
    assert run.data.params["module.model_config.fcnet_hiddens"] == "[8]"
    assert run.data.params["learner_config_dict.tracker_api_key"] == REDACTED

    (wandb_file,) = (artifacts / "wandb").glob("offline-run-*/run-*.wandb")
    config = {
        item.key: json.loads(item.value_json)
        for record in records(wandb_file)
        if record.WhichOneof("record_type") == "config"
        for item in record.config.update
    }
    assert config["lr"] == 1e-3 and config["gamma"] == 0.95
    assert config["algorithm_class"] == "ray.rllib.algorithms.ppo.ppo.PPO"


def test_compare_groups_and_filters_by_config_keys(runs, capsys):
    metric = ["--metric", "env_runners/episode_return_mean", "--json"]
    capsys.readouterr()
    assert main(["compare", str(runs.leaf), *metric, "--group-by", "lr"]) == 0
    arms = {arm["arm"]: arm for arm in json.loads(capsys.readouterr().out)["arms"]}
    assert sorted(arms) == ["leaf [lr=0.001]", "leaf [lr=0.003]"]
    assert arms["leaf [lr=0.003]"]["seeds"] == [2]

    assert main(["compare", str(runs.leaf), *metric, "--where", "lr=0.003"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in printed["runs"]] == ["b"]
    assert "only runs with config lr=0.003 (1 left out)" in printed["notes"]

    assert main(["compare", str(runs.leaf), "--where", "lr=0.5"]) == 2
    assert "no completed run has the config lr=0.5" in capsys.readouterr().err
    assert main(["compare", str(runs.leaf), "--where", "lr"]) == 2
    assert "--where takes KEY=VALUE" in capsys.readouterr().err
