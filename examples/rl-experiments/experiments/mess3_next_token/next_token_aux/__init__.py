"""PPO + GRU on the MESS3 next-token task, plus a next-token auxiliary loss."""
