"""The flagship's action bins come from the fit episodes only (issue 49, class 10): held-out
actions are coded by the fit episodes' equal-frequency bins and never move a cut. Through
the study's own `controls.action_branching`, on a sample whose answer is known by hand."""

from __future__ import annotations

import numpy as np
from experiments.mess3_belief_geometry import controls, probing


def test_action_bins_are_cut_on_the_fit_episodes_only():
    # Episode 0 (fit): coordinate 0 takes 0, 1, ..., 5; episode 1 (held out): 10 throughout.
    # Coordinate 1 is constant. Tokens cycle 0, 1, 2 in both.
    tokens = np.zeros((2, 6, 3))
    for t in range(6):
        tokens[:, t, t % 3] = 1.0
    actions = np.zeros((2, 6, 2))
    actions[0, :, 0] = np.arange(6.0)
    actions[1, :, 0] = 10.0
    assert (probing.BRANCH_K, controls.ACTION_BINS) == (2, 3)  # the study's, as below
    branching = controls.action_branching(tokens, actions, np.array([0]), np.array([1]))
    # Fit bins by mid-rank among the six fit values: 0,1 | 2,3 | 4,5, all three used, and
    # 10 lies above them all: the top bin. (Cut on both episodes, the six 10s would take the
    # top bin alone and squeeze the fit values into two: 0-3 | 4,5.)
    assert branching.record["bins_used_per_coordinate"] == [3, 1]
    labels = branching.labels[probing.ACTION_BRANCHES]
    # Held-out step 5 saw tokens (1, 2) after actions in bins (2, 2): the branch of fit step 5.
    assert labels[1, 5] == labels[0, 5]
    # Fit step 3 (tokens (2, 0), bins (1, 1)) is not the branch of held-out step 3 (bins 2, 2).
    assert labels[1, 3] != labels[0, 3]
    # Fit: 6 branches. Held out: steps 0, 1 (= 4) and 3 are new, 2 (= 5) is fit step 5's: 9.
    assert branching.record["n_branches"] == {"tokens_2": 4, "tokens_actions_2": 9}
