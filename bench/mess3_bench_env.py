"""The MESS3 env both benches measure (paper setting x = 0.05, alpha = 0.85)."""

MESS3_NEXT_TOKEN = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "task_kwargs": {},
    "episode_length": 128,
    "token_window": 8,
}
