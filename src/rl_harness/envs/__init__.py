"""rl_harness.envs."""
