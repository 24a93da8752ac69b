"""The previous-action piece's former path; it lives in
`rl_harness.learners.connectors.prev_action`.

Kept because checkpoints name it: RLlib pickles a config's connector factories by module
path, so runs recorded before the move restore through it. Import from `learners.models`
or `learners.connectors`.
"""

from rl_harness.learners.connectors.prev_action import (
    PrevActionToBatch,
    prev_action_env_to_module,
    prev_action_learner,
)

__all__ = ["PrevActionToBatch", "prev_action_env_to_module", "prev_action_learner"]
