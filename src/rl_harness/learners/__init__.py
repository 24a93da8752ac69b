"""rl_harness.learners."""
