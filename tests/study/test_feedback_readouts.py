"""The feedback study's policy read-outs through the library (issue 50 item 1): on an
untrained module's own greedy and sampled play, the read-outs' episodes are the analysis'
(same beliefs), agreement is the share of steps where the module's action is the Bayes
guesser's, and the hidden states cover every step."""

from __future__ import annotations

import numpy as np
import torch
from experiments.mess3_feedback import shared
from experiments.mess3_feedback.ppo import experiment as ppo
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import OneStepLookaheadPolicy
from rl_harness.learners.models import TransformerActorCritic


def test_readouts_of_an_untrained_guesser_on_its_own_play():
    env = HMMVectorEnv(1, shared.env_config(dict_observation=True))
    spec = RLModuleSpec(
        module_class=TransformerActorCritic,
        model_config=ppo.MODEL_CONFIG,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        module = spec.build()
    plan, seed = ppo.SMOKE, 3
    out = shared.readouts(module, plan, seed, {"value": 0.7, "standard_error": 0.01})
    greedy = shared.readout_rollouts(module, plan, seed, "greedy")
    # The read-outs' greedy episodes are the analysis' own (the extra info changes nothing).
    np.testing.assert_array_equal(
        greedy.targets[..., :3], shared.collect(module, plan, seed).targets
    )
    reference = OneStepLookaheadPolicy(shared.TASK_OBJECT, "reward")(greedy.targets[..., :3])
    block = out["greedy"]
    assert block["agreement"] == float((greedy.actions == reference).mean())
    assert block["n_steps"] == plan.probe_episodes * plan.probe_steps
    states = greedy.targets[..., 3]
    assert set(np.unique(states)) <= {0.0, 1.0, 2.0}
    assert sum(b["n_steps"] for b in block["by_hidden_state"].values()) == block["n_steps"]
    assert set(out) == {"n_actions", "greedy", "sampled", "reference_value"}
    assert out["reference_value"] == {"value": 0.7, "standard_error": 0.01}
    assert 0.0 <= out["sampled"]["agreement"] <= 1.0
