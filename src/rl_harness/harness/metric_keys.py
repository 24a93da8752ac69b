"""RLlib's result keys as metrics.jsonl rows hold them (nested results flattened with "/"):
the one place the library spells them. tests/harness/test_metric_keys.py checks each against
RLlib's and Tune's own constants (imported there, not here: this module stays import-free, so
the light CLI commands that read records never load Ray). Recipes reach them from the root
API (`rl_harness.RETURN_KEY`, `rl_harness.learner_key(...)`)."""

ITERATION_KEY = "training_iteration"  # ray.tune.result.TRAINING_ITERATION; Tune's stop key too
ENV_STEPS_KEY = "num_env_steps_sampled_lifetime"  # env steps sampled so far
ITERATION_TIME_KEY = "time_this_iter_s"  # ray.tune.result.TIME_THIS_ITER_S
TOTAL_TIME_KEY = "time_total_s"  # ray.tune.result.TIME_TOTAL_S

# The two nested sections of a result, and what they hold.
ENV_RUNNERS = "env_runners"  # ray.rllib.utils.metrics.ENV_RUNNER_RESULTS
LEARNERS = "learners"  # ray.rllib.utils.metrics.LEARNER_RESULTS
ALL_MODULES = "__all_modules__"  # ray.rllib.core.ALL_MODULES: learner stats of no one module
DEFAULT_MODULE_ID = "default_policy"  # ray.rllib.core.DEFAULT_MODULE_ID
TOTAL_LOSS = "total_loss"  # Learner.TOTAL_LOSS_KEY, under learners/<module>/
# The per-iteration statistics of env_runners/ that metrics.jsonl keeps.
ENV_RUNNER_STATS = (
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "num_episodes",
    "num_env_steps_sampled",
)

ITERATION_ENV_STEPS_KEY = f"{ENV_RUNNERS}/num_env_steps_sampled"  # env steps of this iteration
RETURN_KEY = f"{ENV_RUNNERS}/episode_return_mean"  # the headline training metric
LENGTH_KEY = f"{ENV_RUNNERS}/episode_len_mean"


def learner_key(name: str, module_id: str = DEFAULT_MODULE_ID) -> str:
    """A Learner metric of one RLModule as metrics.jsonl holds it, e.g.
    `learner_key("total_loss")` -> "learners/default_policy/total_loss"."""
    return f"{LEARNERS}/{module_id}/{name}"
