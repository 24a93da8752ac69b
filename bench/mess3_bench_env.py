"""What the env benches share: the MESS3 next-token env (paper setting x = 0.05,
alpha = 0.85) and the vector env as RLlib's env runner builds it."""

from typing import Any

MESS3_NEXT_TOKEN = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "task_kwargs": {},
    "episode_length": 128,
    "token_window": 8,
}


def rllib_env(env_config: dict[str, Any], num_envs: int, mode: str):
    """The env an RLlib env runner builds: `mode` "sync" (per-env) or "vector_entry_point"."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from rl_harness.envs.hmm import ENV_ID

    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=env_config)
        .env_runners(
            num_env_runners=0, num_envs_per_env_runner=num_envs, gym_env_vectorize_mode=mode
        )
    )
    env = SingleAgentEnvRunner(config=config).env
    env.reset(seed=0)
    return env
