"""`InfoTargetsToBatch`'s former path; it lives in `rl_harness.learners.connectors.info_targets`.

Kept because checkpoints name it: RLlib pickles a config's learner connector by module path,
and runs recorded before the move (config.json: "rl_harness.losses.info_targets.
InfoTargetsToBatch") restore through it. Import from `rl_harness.losses`.
"""

from rl_harness.learners.connectors.info_targets import InfoTargetsToBatch

__all__ = ["InfoTargetsToBatch"]
