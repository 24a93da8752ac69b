"""rl-harness: reproducible RL experiment composition on Ray RLlib and Tune."""
