"""rl_harness.analysis."""
