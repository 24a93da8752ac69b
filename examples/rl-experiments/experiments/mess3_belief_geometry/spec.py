"""What every training leaf of the study runs unless it says otherwise: the budgets, the agent
and PPO.

A leaf's experiment.py builds its config from `ppo_config` and states only its difference
(`next_token_aux`: its head and learner; `belief_observation`: the belief in the
observation); `tests/study/test_belief_geometry_configs.py` checks that each leaf's config
is this one but for what it states.

- `Budget`, SMOKE / CPU / FULL: chosen by name (`--budget NAME`, `--smoke` = smoke), never by
  the hardware plan; `--set KEY=VALUE` changes one setting, `--show-settings` lists them all.
- `MODEL_CONFIG`: the original study's agent, a causal transformer that carries its own
  context (StatefulTransformerActorCritic: width 96, 3 layers, 4 heads, 64-step context,
  trained on 64-step chunks), reading the env's observation (newest visible token and its
  own previous action) one step at a time, initialised as the original study's (issue 37).
- `ppo_config`: the original study's PPO settings, with per-step K/V storage (issue 26).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import StatefulTransformerActorCritic, store_kv_steps


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps per iteration (train_batch_size_per_learner)
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized env copies per env runner
    probe_episodes: int  # episodes rolled out per policy for evaluation and the probe
    warmup_steps: int  # steps each probe episode plays before recording
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval
    n_permutations: int  # refits of each permutation null (global, within-branch)
    window_k_max: int  # window baselines k = 1..window_k_max
    training_probe_episodes: int  # greedy episodes replayed through each checkpoint
    # The interventions (leaves that run them; belief_observation keeps the same sizes):
    intervention_episodes: int  # first greedy episodes the interventions use (1/4 edited)
    intervention_steps: int  # recorded steps of each edited (after the warm-up)
    # The task's operating point, by name (task.TASK_POINTS): "flagship" (the original
    # study's parameters) or "memory" (where memory pays: operating_point.py). A setting, so
    # it is recorded with the run and `--set task_point=memory` moves any leaf there.
    task_point: str = "flagship"
    # Untrained modules (same architecture, seeds `analysis.untrained_seed(seed, j)`; j = 0 the
    # one every control uses) replayed for the incremental test's (c): one random network is
    # one draw, so the claim is made against each of them (incremental.py). The flagship
    # leaves keep 1 (their records as before); the memory leaves, where the claim is read,
    # MEMORY_UNTRAINED_INITS.
    untrained_inits: int = 1


# The memory leaves' untrained initialisations for the incremental test (Budget.untrained_inits):
# three draws: the claim "b - c > 0" must hold against the worst of them.
MEMORY_UNTRAINED_INITS = 3

# One tiny iteration and small probes: checks the recipe end to end (meant to take well
# under 2 minutes; measured times in the study README).
SMOKE = Budget(
    iterations=1,
    train_batch=512,
    minibatch=256,
    num_epochs=1,
    num_envs=4,
    probe_episodes=8,
    warmup_steps=16,
    probe_steps=64,
    n_bootstrap=100,
    n_permutations=10,
    window_k_max=2,
    training_probe_episodes=8,
    intervention_episodes=8,
    intervention_steps=16,
)
# CPU default: 62 x 32,768 = 2,031,616 env steps, the fewest iterations that reach 2M steps;
# meant to fit 30 minutes on 2 cores with the analysis (measured times: the study README;
# training speed and memory: docs/performance.md, bench/flagship_throughput.py).
CPU = Budget(
    iterations=62,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=32,
    probe_episodes=256,
    warmup_steps=256,
    probe_steps=512,
    n_bootstrap=1000,
    n_permutations=100,
    window_k_max=6,
    training_probe_episodes=64,
    # Interventions: 64 x (256 + 256) steps replayed through the agent and the control, the
    # 16 held-out episodes edited 4 ways at 2 layers (interventions.INTERVENTION_LAYERS).
    intervention_episodes=64,
    intervention_steps=256,
)
# The original study's budget: 306 x 32,768 = 10,027,008 env steps (>= 10M), for the
# `--budget full` (on a GPU with --hardware-profile single-gpu: the study README's vast
# command, 3 seeds).
FULL = Budget(
    iterations=306,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=64,
    probe_episodes=256,
    warmup_steps=256,
    probe_steps=512,
    n_bootstrap=1000,
    n_permutations=100,
    window_k_max=6,
    training_probe_episodes=64,
    # Interventions: as CPU's.
    intervention_episodes=64,
    intervention_steps=256,
)
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"


def memory_budget(name: str) -> Budget:
    """The study's budget `name` at the memory point (task.TASK_POINTS["memory"]) with
    MEMORY_UNTRAINED_INITS untrained inits: the memory leaves' budgets. A function, so that
    `--show-settings` reads each leaf's budgets without importing torch (harness/recipe.py)."""
    return dataclasses.replace(
        BUDGETS[name], task_point="memory", untrained_inits=MEMORY_UNTRAINED_INITS
    )


# The original study's transformer size. The previous action comes in the observation (the
# env's action_window), so the module's own prev-action input stays off.
MODEL_CONFIG = {
    # The original study's initialisation (issue 37): trunk weights N(0, 0.02), trunk biases
    # 0, input projection without a bias, policy and value heads at PyTorch's scale.
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
    "max_seq_len": 64,
    "context": 64,
    "d_model": 96,
    "num_heads": 4,
    "num_layers": 3,
    "prev_action": False,
}


def module_spec(
    module_class: type = StatefulTransformerActorCritic,
    model_config: Mapping[str, Any] = MODEL_CONFIG,
) -> RLModuleSpec:
    """The agent: a recurrent actor-critic; its per-step representation is what we probe."""
    return RLModuleSpec(module_class=module_class, model_config=model_config)


def ppo_config(
    plan: Budget, *, env_config: Mapping[str, Any], module_spec: RLModuleSpec
) -> PPOConfig:
    """A fresh PPOConfig (a caller's edits never leak into the next run) of the study's PPO
    on `env_config` (task.env_config) with the agent `module_spec`. A leaf that sets its own
    learner class must compose `KVCacheLearnerMixin` (the per-step K/V storage needs it)."""
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=env_config)
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            # The original study's PPO settings.
            lr=3e-4,
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            vf_loss_coeff=0.5,
            entropy_coeff=0.003,
            # RLlib's default adds a KL term (0.2); this study turns it off. The original's
            # reward_only recipe (RL-Harness d2d2613) and its action-symmetry family set no
            # KL option, so the default was on there (docs/migrating.md): a port of those
            # that copies this config changes it.
            use_kl_loss=False,
        )
        .rl_module(rl_module_spec=module_spec)
    )
    # Episodes store each step's new key/value, not the whole 64-step cache (issue 26).
    return store_kv_steps(config)
