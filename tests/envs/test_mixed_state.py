"""The mixed-state presentation: exact Z1R layers by hand, every prefix against brute-force
enumeration, merging, and exact entropies."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import (
    HMMModel,
    filter_beliefs,
    merge_beliefs,
    mixed_state_presentation,
    product_hmm,
    rrxor_model,
    unifilar_entropy_rate,
    update,
    zero_one_random_model,
)
from rl_harness.envs.mess3 import mess3_model
from tests.envs.helpers import conditional_entropy, word_probabilities

THIRD = 1.0 / 3.0
H_THIRD = -(THIRD * np.log2(THIRD) + 2 * THIRD * np.log2(2 * THIRD))  # H(1/3, 2/3)


def test_z1r_layers_by_hand():
    msp = mixed_state_presentation(zero_one_random_model(), 5)
    assert msp.depth == 5 and [layer.n_nodes for layer in msp.layers] == [1, 2, 4, 3, 3, 3]
    one, two, three = msp.layers[1:4]
    np.testing.assert_array_equal(one.prefixes, [[0], [1]])
    np.testing.assert_allclose(one.beliefs, [[THIRD, 2 * THIRD, 0], [THIRD, 0, 2 * THIRD]])
    np.testing.assert_allclose(one.probabilities, [0.5, 0.5])
    np.testing.assert_array_equal(two.prefixes, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_allclose(two.beliefs, [[0, 1, 0], [0, 0, 1], [0.5, 0.5, 0], [1, 0, 0]])
    np.testing.assert_allclose(two.probabilities, [1 / 6, 1 / 3, 1 / 3, 1 / 6])
    # Depth 3 is synchronized: the six possible words land on the three states, two each;
    # each node keeps its smallest prefix.
    np.testing.assert_array_equal(three.prefixes, [[0, 0, 1], [0, 1, 0], [1, 0, 0]])
    np.testing.assert_allclose(three.beliefs, np.eye(3)[[2, 0, 1]], atol=1e-15)
    np.testing.assert_allclose(three.probabilities, [THIRD] * 3)
    np.testing.assert_array_equal(three.n_prefixes, [2, 2, 2])
    # Edges into depth 3: "10" (node 2 of depth 2, belief (1/2, 1/2, 0)) goes on 0 to B
    # (node 2) and on 1 to R (node 0), each with probability 1/2.
    from_10 = three.sources == 2
    np.testing.assert_array_equal(three.tokens[from_10], [0, 1])
    np.testing.assert_array_equal(three.targets[from_10], [2, 0])
    np.testing.assert_allclose(three.token_probabilities[from_10], [0.5, 0.5])
    np.testing.assert_allclose(
        msp.conditional_entropies(), [1, H_THIRD, 2 / 3, 1 / 3, 1 / 3, 1 / 3], atol=1e-15
    )
    assert msp.block_entropies()[3] == pytest.approx(np.log2(6), abs=1e-14)
    assert msp.entropy_rate_estimate() == pytest.approx(1 / 3, abs=1e-15)


@pytest.mark.parametrize(
    "model",
    [mess3_model(0.05, 0.85), zero_one_random_model(), rrxor_model()],
    ids=["mess3", "z1r", "rrxor"],
)
def test_unmerged_presentation_is_every_prefix_against_enumeration(model: HMMModel):
    msp = mixed_state_presentation(model, 5, tolerance=None)
    for layer in msp.layers[1:]:
        words, probabilities, beliefs = word_probabilities(model, layer.depth)
        possible = probabilities > 0
        # Exactly the nonzero-probability words, in lexicographic order.
        np.testing.assert_array_equal(layer.prefixes, words[possible])
        np.testing.assert_allclose(layer.probabilities, probabilities[possible], atol=1e-15)
        np.testing.assert_allclose(layer.beliefs, beliefs[possible], atol=1e-12)
        np.testing.assert_allclose(
            layer.beliefs, filter_beliefs(model, layer.prefixes)[:, -1], atol=1e-12
        )
        np.testing.assert_array_equal(layer.n_prefixes, 1)
        assert layer.probabilities.sum() == pytest.approx(1.0, abs=1e-13)


@pytest.mark.parametrize("model", [mess3_model(0.05, 0.85), rrxor_model()], ids=["mess3", "rrxor"])
def test_conditional_entropies_match_enumeration(model: HMMModel):
    entropies = mixed_state_presentation(model, 5).conditional_entropies()
    for length in range(1, 7):
        expected = conditional_entropy(model, length)
        assert entropies[length - 1] == pytest.approx(expected, abs=1e-12)


def test_mess3_prefix_probabilities_sum_to_one_at_every_depth():
    msp = mixed_state_presentation(mess3_model(0.05, 0.85), 9)
    # MESS3 at the paper setting has no two beliefs within 1e-9 up to depth 9: 3**d nodes
    # (at depth 12 some distinct ones are, and merge).
    assert [layer.n_nodes for layer in msp.layers] == [3**d for d in range(10)]
    for layer in msp.layers:
        assert layer.probabilities.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(layer.probabilities > 0)
    entropies = msp.conditional_entropies()
    assert np.all(np.diff(entropies) <= 1e-12)  # stationary: nonincreasing
    assert entropies[0] == pytest.approx(np.log2(3), abs=1e-14)


def test_edges_carry_each_layer_to_the_next():
    model = rrxor_model()
    msp = mixed_state_presentation(model, 8)
    for parent, layer in zip(msp.layers[:-1], msp.layers[1:], strict=True):
        flowed = np.bincount(
            layer.targets,
            weights=parent.probabilities[layer.sources] * layer.token_probabilities,
            minlength=layer.n_nodes,
        )
        np.testing.assert_allclose(flowed, layer.probabilities, atol=1e-15)
        np.testing.assert_allclose(
            layer.beliefs[layer.targets],
            update(model, parent.beliefs[layer.sources], layer.tokens),
            atol=1e-9,
        )


def test_merging_sums_probabilities_and_counts_prefixes():
    model = zero_one_random_model()
    merged = mixed_state_presentation(model, 6)
    unmerged = mixed_state_presentation(model, 6, tolerance=None)
    for kept, every in zip(merged.layers, unmerged.layers, strict=True):
        assert kept.n_prefixes.sum() == every.n_nodes
        # Each prefix's node is the one holding its belief; probabilities add up per node.
        distance = np.abs(every.beliefs[:, None, :] - kept.beliefs[None, :, :]).max(axis=2)
        node = distance.argmin(axis=1)
        assert np.all(distance.min(axis=1) < 1e-12)
        np.testing.assert_allclose(
            np.bincount(node, weights=every.probabilities, minlength=kept.n_nodes),
            kept.probabilities,
        )
        np.testing.assert_array_equal(np.bincount(node, minlength=kept.n_nodes), kept.n_prefixes)
    np.testing.assert_allclose(
        merged.conditional_entropies(), unmerged.conditional_entropies(), atol=1e-14
    )


def test_merge_beliefs_grid():
    beliefs = np.array([[0.5, 0.5], [0.2, 0.8], [0.5 + 1e-13, 0.5 - 1e-13], [0.5 + 1e-6, 0.5]])
    first, node_of_row, weights = merge_beliefs(beliefs, np.array([1.0, 2.0, 3.0, 4.0]), 1e-9)
    np.testing.assert_array_equal(first, [0, 1, 3])  # nodes in order of their first row
    np.testing.assert_array_equal(node_of_row, [0, 1, 0, 2])
    np.testing.assert_allclose(weights, [4.0, 2.0, 4.0])
    _, coarse, _ = merge_beliefs(beliefs, np.ones(4), 1e-3)
    np.testing.assert_array_equal(coarse, [0, 1, 0, 0])
    with pytest.raises(ValueError, match="tolerance"):
        merge_beliefs(beliefs, np.ones(4), 0.0)


def test_rrxor_estimates_fall_to_two_thirds():
    entropies = mixed_state_presentation(rrxor_model(), 40).conditional_entropies()
    assert np.all(np.diff(entropies) <= 1e-12)
    assert np.all(entropies >= 2 / 3 - 1e-12)
    assert entropies[-1] == pytest.approx(2 / 3, abs=1e-4)
    assert entropies[-1] - 2 / 3 > 1e-6  # not yet synchronized at depth 40: an upper bound


def test_product_presentation_adds_factor_entropies():
    z1r, mess3 = zero_one_random_model(), mess3_model(0.05, 0.85)
    product = product_hmm(z1r, mess3)
    joint = mixed_state_presentation(product.model, 5).conditional_entropies()
    parts = [mixed_state_presentation(f, 5).conditional_entropies() for f in product.factors]
    np.testing.assert_allclose(joint, parts[0] + parts[1], atol=1e-12)
    twice = product_hmm(z1r, rrxor_model()).model
    rate = mixed_state_presentation(twice, 60).entropy_rate_estimate()
    assert rate == pytest.approx(unifilar_entropy_rate(twice), abs=1e-5)


def test_pooled_points_of_z1r():
    beliefs, probabilities = mixed_state_presentation(zero_one_random_model(), 5).pooled()
    # Uniform, the two depth-1 beliefs, (1/2, 1/2, 0) and the three states.
    expected = {
        (THIRD, THIRD, THIRD): 1 / 6,
        (THIRD, 2 * THIRD, 0.0): 1 / 12,
        (THIRD, 0.0, 2 * THIRD): 1 / 12,
        (0.5, 0.5, 0.0): 1 / 18,
        (1.0, 0.0, 0.0): 7 / 36,
        (0.0, 1.0, 0.0): 7 / 36,
        (0.0, 0.0, 1.0): 8 / 36,
    }
    got = {tuple(np.round(b, 12)): p for b, p in zip(beliefs, probabilities, strict=True)}
    assert got == pytest.approx({tuple(np.round(b, 12)): p for b, p in expected.items()})


def test_presentation_arguments_are_checked():
    z1r = zero_one_random_model()
    with pytest.raises(ValueError, match="not stationary"):
        mixed_state_presentation(z1r, 2, initial=np.array([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="tolerance"):
        mixed_state_presentation(z1r, 0, tolerance=0.0)
    with pytest.raises(ValueError, match="max_nodes"):
        mixed_state_presentation(mess3_model(0.05, 0.85), 5, tolerance=None, max_nodes=100)
    with pytest.raises(ValueError, match="non-negative"):
        mixed_state_presentation(z1r, -1)
    nonstationary = HMMModel.from_token_matrices(z1r.token_matrices, [1.0, 0.0, 0.0])
    start = nonstationary.stationary_distribution()
    assert mixed_state_presentation(nonstationary, 3, initial=start).depth == 3
