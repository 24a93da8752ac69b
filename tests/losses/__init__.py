"""Tests of rl_harness.losses."""
