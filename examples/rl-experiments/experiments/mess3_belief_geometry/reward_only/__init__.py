"""PPO steering MESS3 occupancy control, rewarded only by the task."""
