"""PPO with the recurrent (GRU) module on the MESS3 next-token task, plus a next-token
auxiliary loss.

Same process, agent, budget and probe as `reward_only` (see shared.py); the one change: a
linear next-token classifier head on the GRU state, trained with cross-entropy against the
token the env emits next (info["token"] one step ahead, written into the train batch by
InfoTargetsToBatch), added to PPO's loss with weight shared.AUX_WEIGHT = 1.0.

Budget (shared.SMOKE / shared.FULL):
- smoke: 1 PPO iteration of 256 env steps, probe on 32 episodes (under 2 min on 2 CPUs);
- full: 60 iterations of 4096 env steps = 245,760 env steps, probe on 256 episodes
  (about 10-15 min on 2 CPU cores).

    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux.experiment --smoke
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_belief_geometry import shared
from rl_harness import RunContext

AUX = True  # next-token head + cross-entropy loss (weight shared.AUX_WEIGHT)


def build_config(smoke: bool) -> PPOConfig:
    return shared.build_config(shared.budget(smoke), aux=AUX)


def run(context: RunContext) -> dict:
    return shared.run_study(context, aux=AUX, label="next_token_aux")
