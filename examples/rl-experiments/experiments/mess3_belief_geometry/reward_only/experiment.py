"""PPO with the recurrent (GRU) module on the MESS3 next-token task, reward only.

Process: MESS3 with x = 0.05, alpha = 0.85 (explicit in shared.py); the agent sees only the
newest token and earns 1 for predicting the next one; 64-step episodes.
Then: an affine probe from the GRU state to the exact belief (from env info), on held-out
episodes with bootstrap intervals; writes results/<run-id>/probe_metrics.json,
belief_simplex.png and learning_curve.png.

Budget (shared.SMOKE / shared.FULL):
- smoke: 1 PPO iteration of 256 env steps, probe on 32 episodes (under 2 min on 2 CPUs);
- full: 60 iterations of 4096 env steps = 245,760 env steps, probe on 256 episodes
  (about 10-15 min on 2 CPU cores).

    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment --smoke
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_belief_geometry import shared
from rl_harness import RunContext

AUX = False  # the next-token auxiliary loss is off: the task reward is the only signal


def build_config(smoke: bool) -> PPOConfig:
    return shared.build_config(shared.budget(smoke), aux=AUX)


def run(context: RunContext) -> dict:
    return shared.run_study(context, aux=AUX, label="reward_only")
