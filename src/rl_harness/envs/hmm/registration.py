"""Gymnasium registration of the HMM env (both the single and the batched entry point)."""

from __future__ import annotations

import gymnasium as gym

ENV_ID = "rl_harness/HMM-v0"
# Use this id where the env is built in a process that may not have imported this package
# (e.g. RLlib remote env runners): gymnasium imports the module before looking the id up.
IMPORTING_ENV_ID = f"rl_harness.envs.hmm:{ENV_ID}"

_ENTRY_POINT = "rl_harness.envs.hmm.env:HMMEnv"
_VECTOR_ENTRY_POINT = "rl_harness.envs.hmm.vector_env:HMMVectorEnv"


def register_envs() -> None:
    """Register ENV_ID with gymnasium; safe to call any number of times."""
    spec = gym.registry.get(ENV_ID)
    if spec is not None:
        if (spec.entry_point, spec.vector_entry_point) != (_ENTRY_POINT, _VECTOR_ENTRY_POINT):
            raise RuntimeError(f"{ENV_ID!r} is already registered to {spec.entry_point!r}")
        return
    gym.register(id=ENV_ID, entry_point=_ENTRY_POINT, vector_entry_point=_VECTOR_ENTRY_POINT)
