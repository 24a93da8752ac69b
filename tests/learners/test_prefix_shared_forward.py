"""The prefix-shared training forward (TransformerActorCritic "train_forward":
"prefix_shared") is the per-window forward computed once per distinct window prefix.

Three levels: the trie itself (every node's ancestors spell its prefix; one node per
distinct prefix), the encoder in float64 (outputs and every parameter gradient equal to
1e-10: the same function, only the summation order differs), and real RLlib train batches
of the token-guess recipes in float32 (logits, values, the PPO loss, the supervised loss
and every parameter gradient equal to float32 summation-order tolerance).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.components.transformer import distinct_rows, prefix_trie
from rl_harness.learners.models import TransformerActorCritic

STUDY = "experiments.mess3_token_guess"


def test_trie_has_one_node_per_distinct_prefix_and_ancestors_spell_it():
    rng = np.random.default_rng(0)
    # Few symbols in the oldest slots: many shared prefixes, as on MESS3.
    symbols = torch.as_tensor(rng.integers(0, 3, (300, 6)))
    symbols[:, :3] = torch.as_tensor(rng.integers(0, 2, (300, 3)))
    trie = prefix_trie(symbols, vocab=3)
    prefixes = {tuple(row[: j + 1]) for row in symbols.tolist() for j in range(6)}
    assert trie.symbol.shape[0] == len(prefixes)
    # Node n's ancestors, read back through the symbols, are exactly its prefix ...
    spelled = [
        tuple(trie.symbol[trie.ancestors[n, : int(trie.depth[n]) + 1]].tolist())
        for n in range(trie.symbol.shape[0])
    ]
    assert set(spelled) == prefixes and len(set(spelled)) == len(spelled)
    assert (
        trie.ancestors[torch.arange(len(spelled)), trie.depth] == torch.arange(len(spelled))
    ).all()
    assert torch.equal(trie.attend, torch.arange(6)[None] <= trie.depth[:, None])
    # ... and each window's leaf spells the whole window.
    torch.testing.assert_close(trie.symbol[trie.ancestors[trie.leaf]], symbols)
    assert (trie.depth[trie.leaf] == 5).all() and (trie.depth[trie.leaf_start :] == 5).all()


def test_distinct_rows_are_bit_exact():
    x = torch.tensor([[0.0, 1.0], [0.0, 1.0], [-0.0, 1.0], [0.5, 1.0], [0.0, 1.0 + 2**-23]])
    rows, ids = distinct_rows(x)
    assert rows.shape[0] == 4 and ids[0] == ids[1]
    assert len({int(i) for i in ids[[0, 2, 3, 4]]}) == 4  # -0.0 and 1 ulp stay distinct
    assert torch.equal(rows[ids].view(torch.int32), x.view(torch.int32))
    many = torch.nn.functional.one_hot(torch.randint(0, 3, (5000,)), 3).float()
    many[:700] = 0.0
    rows, ids = distinct_rows(many)
    assert rows.shape[0] == 4 and torch.equal(rows[ids], many)


ENCODERS = {
    "paper-tokens": {"token_input": True, "num_layers": 4, "num_heads": 1, "d_head": 8},
    "paper-features": {"token_input": False, "num_layers": 4, "num_heads": 1, "d_head": 8},
    "rotary-2-heads": {"token_input": True, "positions": "rotary", "num_heads": 2},
    "no-final-norm": {"token_input": False, "final_norm": False, "activation": "gelu"},
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
@pytest.mark.parametrize("width", [7, 4])  # the whole context, and a shorter window
def test_encoder_prefix_shared_equals_per_window_in_float64(name, width):
    torch.manual_seed(0)
    options = {"num_layers": 3, "num_heads": 2, "activation": "relu"} | ENCODERS[name]
    enc = CausalTransformerEncoder(
        input_dim=3, context_len=7, d_model=16, ff_dim=32, **options
    ).double()
    tokens = torch.randint(0, 3, (200, width))
    tokens[:, : width // 2] = torch.randint(0, 2, (200, width // 2))
    if options["token_input"]:
        x = tokens
    else:
        x = torch.nn.functional.one_hot(tokens, 3).double()
        x[:40, :2] = 0.0  # episode starts: zero rows before the first token
    weights = torch.randn(200, 16, dtype=torch.float64)
    per_window, shared = enc.last_position(x), enc.last_position_prefix_shared(x)
    torch.testing.assert_close(shared, per_window, rtol=1e-10, atol=1e-10)
    params = list(enc.parameters())
    for a, b in zip(
        torch.autograd.grad((per_window * weights).sum(), params),
        torch.autograd.grad((shared * weights).sum(), params),
        strict=True,
    ):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)


class RecordingPPOLearner(PPOTorchLearner):
    """Keeps the last minibatch the loss saw (no behaviour change)."""

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        self.last_batch = batch
        return super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )


def _recipe_config(leaf: str):
    """The leaf's own recipe at SMOKE, with short episodes so the batch holds episode starts
    (zero rows in the window) and chunk cuts, and the recording learner mixed in."""
    module = importlib.import_module(f"{STUDY}.{leaf}.experiment")
    config = module.build_config(module.SMOKE)
    assert config.env_config["random_first_episode_length"] is True
    learner = type(f"Recording{leaf}", (RecordingPPOLearner, config.learner_class), {})
    return (
        config.environment(env_config=config.env_config | {"episode_length": 40})
        .env_runners(num_env_runners=0, rollout_fragment_length=64, num_envs_per_env_runner=8)
        .training(train_batch_size_per_learner=512, minibatch_size=512, num_epochs=1)
        .learners(learner_class=learner)
        .debugging(seed=3)
    )


def _loss_and_grads(learner, module, batch: dict[str, Any], mode: str):
    module.train_forward = mode
    fwd_out = module.forward_train(batch)
    values = module.compute_values(batch)
    loss = learner.compute_loss_for_module(
        module_id="default_policy",
        config=learner.config.get_config_for_module("default_policy"),
        batch=batch,
        fwd_out=fwd_out,
    )
    params = [p for p in module.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return fwd_out, values, loss, grads


@pytest.mark.parametrize("leaf", ["ppo", "supervised"])
def test_recipe_train_batch_prefix_shared_equals_per_window(leaf, ray_session):
    config = _recipe_config(leaf)
    assert config.rl_module_spec.model_config["train_forward"] == "prefix_shared"
    algo = config.build_algo()
    try:
        algo.train()
        learner = algo.learner_group._learner
        module = learner.module["default_policy"]
        assert isinstance(module, TransformerActorCritic)
        batch = learner.last_batch
        obs = batch[Columns.OBS].reshape(-1, 10, 3)
        # The batch crosses episode starts (windows not yet full) and holds full windows.
        full = obs.sum(dim=-1).bool().all(dim=-1)
        assert 0 < int(full.sum()) < obs.shape[0]
        per_window = _loss_and_grads(learner, module, batch, "per_window")
        shared = _loss_and_grads(learner, module, batch, "prefix_shared")
        module.train_forward = "prefix_shared"
    finally:
        algo.stop()
    (fwd_a, values_a, loss_a, grads_a), (fwd_b, values_b, loss_b, grads_b) = per_window, shared
    # float32, ~1e-7 relative rounding, summed in another order over <= 512 windows and
    # 10 positions: 1e-5 relative (atol 1e-6 for entries near 0) is summation order, while
    # a wrong parent or position moves outputs by ~1e-2 (the mutants in mutation_check).
    for key in (Columns.ACTION_DIST_INPUTS, Columns.EMBEDDINGS):
        torch.testing.assert_close(fwd_b[key], fwd_a[key], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(values_b, values_a, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-7)
    compared = 0
    for a, b in zip(grads_a, grads_b, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            scale = float(a.abs().max())
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5 * scale + 1e-9)
            compared += 1
    # ppo trains every parameter; supervised leaves the value head without a gradient.
    assert compared == (len(grads_a) if leaf == "ppo" else len(grads_a) - 2)
    assert math.isfinite(float(loss_a.detach()))


def test_prefix_shared_needs_dropout_zero_and_a_known_choice():
    space = gym.spaces.Box(0.0, 1.0, (4, 3), np.float32)

    def build(**config):
        return TransformerActorCritic(
            observation_space=space,
            action_space=gym.spaces.Discrete(3),
            model_config={"d_model": 16} | config,
        )

    with pytest.raises(ValueError, match="prefix_shared.*dropout"):
        build(train_forward="prefix_shared", dropout=0.1)
    with pytest.raises(ValueError, match="train_forward"):
        build(train_forward="banded")
    assert build().train_forward == "per_window"  # the default is today's path
