"""Gymnasium registration of the HMM env (both the single and the batched entry point)."""

from __future__ import annotations

import gymnasium as gym

REGISTERED_ENV_ID = "rl_harness/HMM-v0"  # the id in gymnasium's registry (env.spec.id)
# The id recipes pass to RLlib and gym.make: "module:id" makes gymnasium import this package,
# and so register the id, in any process that builds the env, RLlib's remote env runners
# included (a bare "rl_harness/HMM-v0" fails there with "Namespace rl_harness not found").
ENV_ID = f"rl_harness.envs.hmm:{REGISTERED_ENV_ID}"

_ENTRY_POINT = "rl_harness.envs.hmm.env:HMMEnv"
_VECTOR_ENTRY_POINT = "rl_harness.envs.hmm.vector_env:HMMVectorEnv"


def register_envs() -> None:
    """Register REGISTERED_ENV_ID with gymnasium; safe to call any number of times."""
    spec = gym.registry.get(REGISTERED_ENV_ID)
    if spec is not None:
        if (spec.entry_point, spec.vector_entry_point) != (_ENTRY_POINT, _VECTOR_ENTRY_POINT):
            raise RuntimeError(
                f"{REGISTERED_ENV_ID!r} is already registered to {spec.entry_point!r}"
            )
        return
    gym.register(
        id=REGISTERED_ENV_ID, entry_point=_ENTRY_POINT, vector_entry_point=_VECTOR_ENTRY_POINT
    )
