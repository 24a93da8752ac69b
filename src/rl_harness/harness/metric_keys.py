"""RLlib's result keys as metrics.jsonl rows hold them (nested results flattened with "/"):
the one place the library spells them. tests/harness/test_metric_keys.py checks each against
RLlib's and Tune's own constants (imported there, not here: this module stays import-free, so
the light CLI commands that read records never load Ray)."""

ITERATION_KEY = "training_iteration"  # ray.tune.result.TRAINING_ITERATION; Tune's stop key too
ENV_STEPS_KEY = "num_env_steps_sampled_lifetime"  # env steps sampled so far
ITERATION_ENV_STEPS_KEY = "env_runners/num_env_steps_sampled"  # env steps of this iteration
RETURN_KEY = "env_runners/episode_return_mean"  # the headline training metric
LENGTH_KEY = "env_runners/episode_len_mean"
