"""rl_harness.harness."""
