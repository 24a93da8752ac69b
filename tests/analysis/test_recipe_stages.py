"""A leaf's analysis stages are read from its RECIPE (issue 48): `Recipe(stages=...)`
checked when built, `leaf_stages` reading them there; a leaf that still declares only a
module `ANALYSIS_STAGES` is refused, naming the fix."""

from __future__ import annotations

import types

import pytest

from rl_harness import Recipe
from rl_harness.analysis import AnalysisStage
from rl_harness.analysis.stages import StageError, leaf_stages
from rl_harness.harness.recipe import RecipeError


def _stage(context):
    return {}


STAGES = (
    AnalysisStage("first", _stage, checkpoints=False),
    AnalysisStage("second", _stage, checkpoints=False),
)


def _leaf(**names) -> types.ModuleType:
    module = types.ModuleType("leaf_under_test")
    for name, value in names.items():
        setattr(module, name, value)
    return module


def test_the_stages_are_read_from_the_recipe():
    leaf = _leaf(RECIPE=Recipe(run=_stage, stages=STAGES))
    assert leaf_stages(leaf) == STAGES


def test_a_module_analysis_stages_outside_the_recipe_is_refused_named():
    leaf = _leaf(RECIPE=Recipe(run=_stage), ANALYSIS_STAGES=STAGES)
    with pytest.raises(StageError, match=r"stages=ANALYSIS_STAGES\)"):
        leaf_stages(leaf)
    with pytest.raises(StageError, match="declares no analysis stages in RECIPE$"):
        leaf_stages(_leaf(RECIPE=Recipe(run=_stage)))


def test_recipe_checks_its_stages():
    with pytest.raises(RecipeError, match="repeats a stage name: first, first"):
        Recipe(run=_stage, stages=(STAGES[0], STAGES[0]))
    with pytest.raises(RecipeError, match="must be a tuple of analysis stages"):
        Recipe(run=_stage, stages=[STAGES[0]])  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="must be a tuple of analysis stages"):
        Recipe(run=_stage, stages=(_stage,))  # type: ignore[arg-type]
