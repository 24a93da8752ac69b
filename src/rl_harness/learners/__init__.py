"""rl_harness.learners: networks for RLlib (components/ pure torch, models/ RLModules) and
the optimizer factory. Nothing is imported here, so components/ stays free of RLlib."""
