"""MESS3 occupancy control: the task every leaf runs and its exact ceilings.

- the task (`env_config`): the control chain with MESS3 emissions (alpha 0.85), a 2-d tilt
  action in [-5, 5]^2, reward 1 in state 2 minus KL(tilted || base) / 4, tokens seen one
  step late (delay 1), 1024-step episodes (rl_harness.envs.mess3.OccupancyControlTask;
  definitions in the library's envs/AGENTS.md);
- the ceilings (`solver_values`): exact long-run reward per step of the oracle (state
  known), the belief MDP (the best any agent can do), the best policy on the last 2 or 3
  visible tokens and the best memoryless one (rl_harness.envs.mess3.solvers, cached on disk),
  and the belief MDP's policy (`belief_mdp_policy`), which the controls and interventions
  act with;
- the operating points (`TaskPoint`, `TASK_POINTS`): the parameters above are the
  "flagship" point; a run names its point with the `task_point` setting (spec.Budget) and
  every function here takes the point (`point_of(plan)`), the flagship's by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The task (explicit: this is the science).
ALPHA = 0.85  # MESS3 emission: a state emits its own token with probability alpha
W_MAX = 5.0  # tilt bound: actions are clipped to [-W_MAX, W_MAX]^2
BETA = 4.0  # KL inverse temperature: reward pays KL / BETA for steering
OCCUPANCY_STATES = (2,)  # paid 1 per step spent here (the rare state: stationary 0.10)
DELAY = 1  # tokens are seen one step late
EPISODE_LENGTH = 1024
MODEL = "rl_harness.envs.mess3:control_chain_model"
TASK = "rl_harness.envs.mess3.tasks:OccupancyControlTask"


@dataclass(frozen=True)
class TaskPoint:
    """One operating point of the task: the parameters a leaf may change (the defaults are
    the flagship's). `mixing` slows the control chain ((1 - mixing) I + mixing B,
    `rl_harness.envs.mess3.control_chain_transition`; 1 = the fixed chain)."""

    alpha: float = ALPHA
    mixing: float = 1.0
    w_max: float = W_MAX
    beta: float = BETA
    delay: int = DELAY

    def problem(self) -> Any:
        """The solvers' `OccupancyProblem` at this point."""
        from rl_harness.envs.mess3.solvers import OccupancyProblem

        return OccupancyProblem(
            self.alpha, self.w_max, self.beta, OCCUPANCY_STATES, mixing=self.mixing
        )

    def env_config(
        self,
        info: Sequence[str],
        *,
        decision_belief_in_observation: bool = False,
        random_first_episode_length: bool = True,
    ) -> dict[str, Any]:
        """The occupancy-control env at this point (see the module's `env_config`)."""
        config: dict[str, Any] = {
            "model": MODEL,
            "model_kwargs": {"alpha": self.alpha},
            "task": TASK,
            "task_kwargs": {
                "w_max": self.w_max,
                "beta": self.beta,
                "occupancy_states": list(OCCUPANCY_STATES),
            },
            "observation_delay": self.delay,
            "episode_length": EPISODE_LENGTH,
            "random_first_episode_length": random_first_episode_length,
            "token_window": 1,
            "action_window": 1,
            "info": list(info),
        }
        if self.mixing != 1.0:  # the flagship's env_config stays as it was
            config["model_kwargs"]["mixing"] = self.mixing
        if decision_belief_in_observation:
            config["include_decision_belief"] = True
        return config


FLAGSHIP = TaskPoint()
# Named points a run picks with its `task_point` setting (spec.Budget). "memory": where memory
# pays, chosen by operating_point.py before any training (operating_point.json, the README).
TASK_POINTS = {
    "flagship": FLAGSHIP,
    # Noisier tokens (alpha 0.6) on a 10x slower chain (mixing 0.1), w_max, beta and delay as
    # the flagship's: the coarse screen's best (stack-2 earns 0.50 of the ceiling 0.964, the
    # 6-step window's within-branch R² 0.46; operating_point.json has every number).
    "memory": TaskPoint(alpha=0.6, mixing=0.1),
}

# Solver key -> label of its reference line (the order they are drawn in).
REFERENCES = {
    "oracle": "oracle (state known)",
    "belief_mdp": "belief-MDP ceiling",
    "stack_3": "best stack-3 found",
    "stack_2": "best stack-2",
    "memoryless": "best memoryless",
}


def env_config(
    info: Sequence[str],
    *,
    decision_belief_in_observation: bool = False,
    random_first_episode_length: bool = True,
    point: TaskPoint = FLAGSHIP,
) -> dict[str, Any]:
    """The occupancy-control env (`rl_harness.envs.hmm.ENV_ID`) at `point`.

    Observation: the newest visible token (one-hot, one step late) and the previous executed
    action (scaled to [0, 1]); with `decision_belief_in_observation`, also the decision
    belief (the belief_observation control). `random_first_episode_length` spreads episode
    ends over the vectorized copies during training; rollouts for analysis turn it off.
    """
    return point.env_config(
        info,
        decision_belief_in_observation=decision_belief_in_observation,
        random_first_episode_length=random_first_episode_length,
    )


def solver_values(cache: bool | str | Path = True, point: TaskPoint = FLAGSHIP) -> dict[str, Any]:
    """Long-run reward per step of each reference policy at `point`.

    From `rl_harness.envs.mess3.solvers` (cached on disk there, so only the first call pays
    for the solve). Keys: oracle, belief_mdp (belief_vi at DELAY), stack_3, stack_2,
    memoryless (reactive), `converged` (each solver's flag), `source`. stack_2 and memoryless
    are global optima (exhaustive scans of the corner tables, then polish); stack_3 is the
    best table the solver's search found, not proven global (4**27 corner tables cannot be
    scanned), so it is labelled "best stack-3 found". If the solvers are not installed the
    values are None and `source` says why, so a run still completes and says what it lacks.
    """
    try:
        from rl_harness.envs.mess3 import solvers
    except ImportError as error:
        return {key: None for key in REFERENCES} | {
            "source": f"unavailable: rl_harness.envs.mess3.solvers ({error})"
        }
    problem, delay = point.problem(), point.delay
    solutions = {
        "oracle": solvers.solve_oracle(problem, cache=cache),
        "belief_mdp": solvers.solve_belief_vi(problem, delay, cache=cache),
        "stack_3": solvers.solve_stack(problem, delay, 3, cache=cache),
        "stack_2": solvers.solve_stack(problem, delay, 2, cache=cache),
        "memoryless": solvers.solve_reactive(problem, delay, cache=cache),
    }
    values = {key: solution.value for key, solution in solutions.items()}
    return values | {
        "converged": {key: bool(solution.converged) for key, solution in solutions.items()},
        "source": "rl_harness.envs.mess3.solvers",
        "problem": problem.settings() | {"delay": delay},
    }


def references_from(values: Mapping[str, Any]) -> dict[str, float]:
    """{line label: value} for the solver values that exist, in REFERENCES order."""
    return {
        label: float(values[key])
        for key, label in REFERENCES.items()
        if values.get(key) is not None
    }


def belief_mdp_policy(cache: bool | str | Path = True, point: TaskPoint = FLAGSHIP) -> Any:
    """The belief MDP's optimal policy at `point` (decision beliefs (n, 3) -> executed
    actions (n, 2)): the same solve as `solver_values`' belief_mdp (cached)."""
    from rl_harness.envs.mess3 import solvers

    return solvers.solve_belief_vi(point.problem(), point.delay, cache=cache).policy


def point_of(plan: Any) -> TaskPoint:
    """The TaskPoint a run's settings name (`task_point`; absent in older records: the
    flagship's)."""
    name = getattr(plan, "task_point", "flagship")
    if name not in TASK_POINTS:
        raise ValueError(f"unknown task_point {name!r}; one of {', '.join(TASK_POINTS)}")
    return TASK_POINTS[name]
