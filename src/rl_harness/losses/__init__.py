"""rl_harness.losses."""
