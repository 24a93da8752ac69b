"""Recipe sources used by the harness tests (written into temp experiment repos)."""

QUICK = """
import json
from rl_harness.harness.manifest import read_manifest

def run(context):
    # The manifest already says `running` while the recipe runs.
    status = read_manifest(context.results_dir)["status"]
    (context.artifacts_dir / "blob.bin").write_bytes(b"x" * 100)
    return {"seen_status": status, "seed": context.seed, "smoke": context.smoke}
"""

FAILING = """
def run(context):
    raise RuntimeError("the recipe broke on purpose")
"""

KEYBOARD = """
def run(context):
    raise KeyboardInterrupt
"""

SLEEPY = """
import time
from pathlib import Path

def run(context):
    (context.results_dir / "started").write_text("yes")
    time.sleep(120)
"""

NO_RUN = """
VALUE = 1
"""

PPO_TINY = """
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    result = run_algorithm(config, context, stop=1)
    return {"iterations": result.iterations}
"""

# A real PPO run slow enough to signal mid-training: each iteration waits half a second after
# training (inside the iteration, as a recipe's own per-iteration work would), 6 in all.
PPO_SIGNALLED = """
import time
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_algorithm

BUDGET = 6

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    result = run_algorithm(
        config, context, stop=BUDGET, on_iteration=lambda algo, result: time.sleep(0.5)
    )
    return {"iterations": result.iterations}
"""

# The same under Tune; each trial also records the interpreter its worker runs. This file is
# not importable in Tune's workers, so its callback travels by value.
PPO_TUNE_SIGNALLED = """
import sys
import time
from ray import cloudpickle
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_tune

BUDGET = 6
cloudpickle.register_pickle_by_value(sys.modules[__name__])

def _slow_and_tell(algorithm, result, **kwargs):
    result["worker_executable"] = sys.executable
    time.sleep(0.5)

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .callbacks(on_train_result=_slow_and_tell)
    )
    result = run_tune(config, context, stop=BUDGET)
    return {"trials": len(result.trials)}
"""
