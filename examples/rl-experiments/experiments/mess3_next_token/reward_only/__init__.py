"""PPO + GRU on the MESS3 next-token task, reward only."""
