"""The action-symmetry process (the original `mess3_reward_state_action_symmetry_cycle_1`,
moved): the control chain, its three actions, the reward, the one-step oracle and the two
exact facts of variant 2.

The process: the MESS3 control chain (alpha 0.85, `control_chain_model`) started from the
uniform law (the original's `control_model`); each state's token is drawn on entering it
(`emission="on_enter"`). Three actions: noop (the chain as it is), positive and negative,
each adding +-EFFECT to the log-odds of entering state 2 from each source row, the other
odds of the row kept (`LogWeightTask`, `log_weights`). Variant 2, the one both leaves run:
positive +1.5 from states 0 and 1 but -1.5 from state 2, negative -1.5 from every row.
Reward 1 when the state a move LEAVES is 2 (the original's `event.state_before == 2`:
`rewarded_state="left"`), so the reward of a step is the occupancy the previous action
bought. The agent sees the newest visible token and its previous action (6 floats: token
one-hot, then action one-hot), as the original's env did.

The one-step oracle (`myopic_oracle`): the original's "myopic oracle" scored each action by
its exact chance of entering state 2 on the coming move (`OneStepLookaheadPolicy(task,
"entered_state")`); under the task's own reward (the state left) every action ties one
step ahead, and the library refuses that objective. Its two exact facts on variant 2
(`facts`): after any controlled move P(s = 2) <= 0.3324 (the largest entry of column 2 of
any action's matrix), and the positive action beats noop until P(s = 2) > 0.7541
(`one_step_threshold`). So at delay 1 the oracle never takes noop (the noop region is out
of reach), while at delay 0 the current token can lift the belief past 0.7541.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl_harness.envs.hmm import HMMEnv
from rl_harness.envs.hmm.action_tasks import (
    LogWeightTask,
    OneStepLookaheadPolicy,
    one_step_threshold,
)

ALPHA = 0.85
EFFECT = 1.5  # the original's effect_size: the log-odds shift of entering state 2
REWARD_STATE = 2
N_ACTIONS = 3  # 0 noop, 1 positive, 2 negative (the original's RLlib action ids)
ACTION_NAMES = ("noop", "positive", "negative")  # by action id (result.json's metric names)
N_TOKENS = 3
EPISODE_LENGTH = 1024  # the original env's
MODEL = "rl_harness.envs.mess3:control_chain_model"
TASK = "rl_harness.envs.hmm.action_tasks:LogWeightTask"
# Per variant, the sign of the shift of entering state 2 from source states 0, 1, 2 for the
# positive and the negative action (the original's task.py `_DIRECTIONS`, restated).
DIRECTIONS: dict[int, dict[str, tuple[int, int, int]]] = {
    1: {"positive": (1, 1, 1), "negative": (-1, -1, -1)},
    2: {"positive": (1, 1, -1), "negative": (-1, -1, -1)},
    3: {"positive": (1, -1, -1), "negative": (-1, 1, -1)},
}
# The original's two exact facts of variant 2 (its findings, 4 decimals).
KNOWN_ENTRY_BOUND = 0.3324
KNOWN_THRESHOLD = 0.7541


def log_weights(variant: int) -> list[list[list[float]]]:
    """(action, source state, entered state): noop, positive, negative."""
    if variant not in DIRECTIONS:
        raise ValueError(f"variant must be one of {sorted(DIRECTIONS)}, got {variant!r}")
    signs = [(0, 0, 0), DIRECTIONS[variant]["positive"], DIRECTIONS[variant]["negative"]]
    return [[[0.0, 0.0, EFFECT * sign] for sign in action] for action in signs]


def env_config(
    variant: int,
    delay: int,
    *,
    info: Sequence[str] = (),
    random_first_episode_length: bool = True,
) -> dict[str, Any]:
    """The env of a leaf (training: spread episode ends over the copies) and of its analysis
    (`random_first_episode_length=False`: every probe episode starts at reset)."""
    if delay not in (0, 1):
        raise ValueError(f"delay must be 0 or 1, got {delay!r}")
    return {
        "model": MODEL,
        "model_kwargs": {"alpha": ALPHA, "start": "uniform"},  # the original started uniform
        "task": TASK,
        "task_kwargs": {
            "emission": "on_enter",
            "log_weights": log_weights(variant),
            "state_rewards": [0, 0, 1],
            "rewarded_state": "left",  # the original rewarded the state a move leaves
        },
        "observation_delay": delay,
        "episode_length": EPISODE_LENGTH,
        "random_first_episode_length": random_first_episode_length,
        "token_window": 1,  # the newest visible token; the transformer keeps its own context
        "action_window": 1,  # the previous action in the observation, as the original's
        "info": list(info),
    }


def task(variant: int, delay: int) -> LogWeightTask:
    built = HMMEnv(env_config(variant, delay)).task
    assert isinstance(built, LogWeightTask)
    return built


def myopic_oracle(variant: int) -> OneStepLookaheadPolicy:
    """The original's one-step reference: the exact chance of entering state 2 on the coming
    move (delay only changes the belief it is fed, not the policy)."""
    return OneStepLookaheadPolicy(task(variant, 1), "entered_state")


def facts(variant: int) -> dict[str, float]:
    """The exact facts the original stated of variant 2: the largest P(s = 2) any controlled
    move leaves (`entry_bound`) and the belief mass on state 2 above which noop beats the
    positive action one step ahead (`threshold`)."""
    built = task(variant, 1)
    return {
        "entry_bound": float(built.transitions[:, :, REWARD_STATE].max()),
        "threshold": one_step_threshold(built, action=1, baseline=0, state=REWARD_STATE),
    }
