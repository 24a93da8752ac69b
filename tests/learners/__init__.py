"""Tests of rl_harness.learners (shared helpers: token_env, ppo_setup)."""
