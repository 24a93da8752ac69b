"""rl_harness.learners: networks for RLlib (components/ pure torch, models/ RLModules), the
connector pieces that feed them and aux-loss targets (connectors/), and the optimizer
factory. Nothing is imported here, so components/ stays free of RLlib."""
