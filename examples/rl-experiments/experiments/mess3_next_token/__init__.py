"""MESS3 next-token prediction: does a PPO agent's GRU state hold the exact Bayesian belief?

Moved here from `mess3_belief_geometry` (which is now the occupancy-control study). This
task barely needs memory: an untrained GRU already probes near R² 0.99 and the best
newest-token policy earns close to the Bayes-optimal reward, so its probe R² is saturated.
"""
