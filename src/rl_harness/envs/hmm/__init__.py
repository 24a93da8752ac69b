"""Finite hidden Markov models as Gymnasium environments, with exact beliefs.

Model and beliefs: `HMMModel` (immutable, validated), `HMMSample`, `predict`, `update`,
`next_token_probabilities`, `filter_beliefs`, `sampled_beliefs`, `window_beliefs` (the filter
that sees only the last m steps: a memory yardstick).

Processes and geometry: `zero_one_random_model` (Z1R) and `rrxor_model` (named constructors
beside `rl_harness.envs.mess3.mess3_model`); `ProductHMM` / `product_hmm(*factors)` (a
factored HMM whose joint `model` emits joint token indices, with per-factor token and belief
maps); `mixed_state_presentation(model, depth)` (every prefix's belief and probability,
equal beliefs merged) with exact conditional and block entropies; `unifilar_entropy_rate`,
`is_unifilar`, `next_token_entropy`, `merge_beliefs`.

Envs: `HMMEnv` (gymnasium.Env) and `HMMVectorEnv` (N copies in one NumPy call, next-step
autoreset), both built from the same JSON-serializable env_config (see `HMMEnvConfig`):

    {"model": "rl_harness.envs.mess3:mess3_model", "model_kwargs": {"x": 0.05, "alpha": 0.85},
     "task": "rl_harness.envs.mess3.tasks:NextTokenTask", "task_kwargs": {},
     "episode_length": 128, "random_first_episode_length": False, "token_window": 8,
     "action_window": 0, "include_belief": False, "include_state": False,
     "include_decision_belief": False,
     "observation_delay": 0, "info": ["token", "belief"]}

Importing this package registers REGISTERED_ENV_ID = "rl_harness/HMM-v0" with gymnasium
(entry point and vector entry point). Recipes use ENV_ID, "rl_harness.envs.hmm:rl_harness/
HMM-v0": gymnasium imports this package (and so registers the id) in whichever process
builds the env, RLlib's remote env runners included:

    config.environment(ENV_ID, env_config=...)
    config.env_runners(gym_env_vectorize_mode="vector_entry_point")

Discrete-action task families (`rl_harness.envs.hmm.action_tasks`): `ActionHMMTask`,
`GuessFeedbackTask`, `LogWeightTask` (one transition matrix per action; emission "on_enter"
or "on_leave", a required choice), `expected_rewards`, `one_step_values`,
`OneStepLookaheadPolicy(task, objective)` (the objective explicit; a task whose actions all
tie is refused), `one_step_threshold`, `closed_loop_value`.

Tasks: a `Task` has a Discrete action space (optionally per-action token matrices); a
`ContinuousTask` has a 1-d Box action space and sets each copy's transition matrix per step
(`control(actions) -> Control`); the env clips finite actions to the box and rejects
wrong shapes, NaN and inf with one error naming the task and the expected shape.

Observation: flat float32 in [0, 1], parts in this order (`env.layout` holds the slices):
token window (newest first, one-hot, zeros before any token; lagged by observation_delay),
previous executed actions (newest first; one-hot, or for a Box task scaled to [0, 1] by the
bounds), exact belief (lagged like the tokens), one-hot hidden state (privileged, never
lagged).

Info keys, each present only when named in env_config "info" (reset infos carry them too):
  "token"             token emitted by the latest move (-1 at reset)
  "state_before"      hidden state the latest move left (-1 at reset)
  "state"             hidden state now
  "belief"            full-information (privileged) belief over the hidden state now given
                      every token so far and the executed actions, float64 (n_states,)
  "decision_belief"   the belief the agent can hold: over the hidden state now given the
                      tokens it has seen (all but the newest observation_delay) and its own
                      executed actions, float64 (n_states,); equals "belief" when the delay
                      is 0
  "action"            the executed action of the latest move (Box: clipped), -1 / zeros at
                      reset
  "transition_matrix" the executed state transition matrix of the latest move (rows = from),
                      float64 (n_states, n_states); the identity at reset
  "reward_components" dict of the task's named reward parts (0.0 at reset)

Randomness: named streams of the reset seed, see `rl_harness.envs.hmm.simulator`.
"""

from rl_harness.envs.hmm.beliefs import (
    filter_beliefs,
    next_token_probabilities,
    predict,
    sampled_beliefs,
    update,
    window_beliefs,
)
from rl_harness.envs.hmm.config import INFO_KEYS, HMMEnvConfig, load_object
from rl_harness.envs.hmm.env import HMMEnv
from rl_harness.envs.hmm.mixed_state import (
    MixedStateLayer,
    MixedStatePresentation,
    is_unifilar,
    merge_beliefs,
    mixed_state_presentation,
    next_token_entropy,
    unifilar_entropy_rate,
)
from rl_harness.envs.hmm.model import HMMModel, HMMSample
from rl_harness.envs.hmm.processes import (
    RRXOR_STATES,
    Z1R_STATES,
    rrxor_model,
    zero_one_random_model,
)
from rl_harness.envs.hmm.product import ProductHMM, product_hmm
from rl_harness.envs.hmm.registration import (
    ENV_ID,
    REGISTERED_ENV_ID,
    register_envs,
)
from rl_harness.envs.hmm.simulator import ObservationLayout, split_observation
from rl_harness.envs.hmm.task import ContinuousTask, Control, Task, Transition
from rl_harness.envs.hmm.vector_env import HMMVectorEnv

register_envs()

__all__ = [
    "ENV_ID",
    "ContinuousTask",
    "Control",
    "REGISTERED_ENV_ID",
    "INFO_KEYS",
    "HMMEnv",
    "HMMEnvConfig",
    "HMMModel",
    "HMMSample",
    "HMMVectorEnv",
    "MixedStateLayer",
    "MixedStatePresentation",
    "ObservationLayout",
    "ProductHMM",
    "RRXOR_STATES",
    "Task",
    "Transition",
    "Z1R_STATES",
    "filter_beliefs",
    "is_unifilar",
    "load_object",
    "merge_beliefs",
    "mixed_state_presentation",
    "next_token_entropy",
    "next_token_probabilities",
    "predict",
    "product_hmm",
    "register_envs",
    "rrxor_model",
    "sampled_beliefs",
    "split_observation",
    "unifilar_entropy_rate",
    "update",
    "window_beliefs",
    "zero_one_random_model",
]
