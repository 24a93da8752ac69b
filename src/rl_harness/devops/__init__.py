"""rl_harness.devops."""
