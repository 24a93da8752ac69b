"""MESS3 and friends on top of `rl_harness.envs.hmm`.

Models: `mess3_model(x, alpha)` (paper setting PAPER_X = 0.05, PAPER_ALPHA = 0.85) and
`control_chain_model(alpha, mixing=1)` (an asymmetric 3-state chain with MESS3's emissions,
slowed by `mixing`: `control_chain_transition`; not MESS3).
Tasks (in `rl_harness.envs.mess3.tasks`, named in env_config as
"rl_harness.envs.mess3.tasks:NextTokenTask" etc.): NextTokenTask, CurrentStateTask,
PassiveTask, ControlledTask, OccupancyControlTask (continuous tilt of the control chain;
math in `rl_harness.envs.mess3.control`; exact solvers in `rl_harness.envs.mess3.solvers`).
Baselines: `bayes_optimal_next_token_reward`,
`bayes_optimal_state_reward`.
"""

from rl_harness.envs.mess3.baselines import (
    bayes_optimal_next_token_reward,
    bayes_optimal_state_reward,
)
from rl_harness.envs.mess3.model import (
    CONTROL_CHAIN_TRANSITION,
    PAPER_ALPHA,
    PAPER_X,
    control_chain_model,
    control_chain_transition,
    mess3_emission,
    mess3_model,
)
from rl_harness.envs.mess3.tasks import (
    ControlledTask,
    CurrentStateTask,
    NextTokenTask,
    OccupancyControlTask,
    PassiveTask,
)

__all__ = [
    "CONTROL_CHAIN_TRANSITION",
    "PAPER_ALPHA",
    "PAPER_X",
    "ControlledTask",
    "CurrentStateTask",
    "NextTokenTask",
    "OccupancyControlTask",
    "PassiveTask",
    "bayes_optimal_next_token_reward",
    "bayes_optimal_state_reward",
    "control_chain_model",
    "control_chain_transition",
    "mess3_emission",
    "mess3_model",
]
