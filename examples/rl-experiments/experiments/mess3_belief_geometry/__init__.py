"""MESS3 belief geometry: does a PPO agent's GRU state hold the exact Bayesian belief?"""
