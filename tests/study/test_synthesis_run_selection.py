"""Which training runs a synthesis pools (issue 49, class 6): completed runs of the chosen
budget only, never a failed, still-running or crashed one, whatever its budget. Through each
synthesis's run selection (`run_folders`), on manifests laid out as the training leaves
write them (`<root>/<leaf>/results/<run-id>/run_manifest.json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from experiments.mess3_belief_geometry.synthesis import experiment as geometry
from experiments.mess3_token_guess.synthesis import experiment as token_guess
from experiments.synthesis_budgets import run_budget


def _run(root: Path, leaf: str, run_id: str, status: str, options: dict) -> str:
    folder = root / leaf / "results" / run_id
    folder.mkdir(parents=True)
    record = {"run_id": run_id, "status": status, "options": options, "hardware": {"plan": {}}}
    (folder / "run_manifest.json").write_text(json.dumps(record))
    return run_id


def _study(root: Path, leaves: tuple[str, ...]) -> dict[str, list[str]]:
    """For each leaf: one completed cpu run, and cpu runs that failed, are still running or
    crashed (a dead process whose manifest still says running reads the same), and a
    completed smoke run recorded before budgets had names (options.smoke only)."""
    completed = {}
    for index, leaf in enumerate(leaves):
        cpu = {"smoke": False, "budget": "cpu"}
        completed[leaf] = [_run(root, leaf, f"20261201T00000{index}Z-done", "completed", cpu)]
        _run(root, leaf, f"20261201T01000{index}Z-fail", "failed", cpu)
        _run(root, leaf, f"20261201T02000{index}Z-live", "running", cpu)
        _run(root, leaf, f"20261201T03000{index}Z-stop", "interrupted", cpu)
        _run(root, leaf, f"20261201T04000{index}Z-old", "completed", {"smoke": True})
    return completed


@pytest.mark.parametrize(
    "synthesis", [token_guess, geometry], ids=["mess3_token_guess", "mess3_belief_geometry"]
)
def test_only_completed_runs_of_the_budget_are_pooled(synthesis, tmp_path):
    leaves = synthesis.TRAINING_LEAVES
    completed = _study(tmp_path, leaves)
    folders, others = synthesis.run_folders(tmp_path, "cpu")
    if isinstance(folders, dict):  # the token-guess synthesis keeps them by leaf
        assert {leaf: [p.name for p in paths] for leaf, paths in folders.items()} == completed
    else:
        assert [p.name for p in folders] == [run for leaf in leaves for run in completed[leaf]]
    # Runs of another budget are named as left out, unfinished ones never.
    assert others == {"smoke": [f"20261201T04000{i}Z-old" for i in range(len(leaves))]}
    smoke, _ = synthesis.run_folders(tmp_path, "smoke")
    pooled = (
        [p.name for paths in smoke.values() for p in paths]
        if isinstance(smoke, dict)
        else [p.name for p in smoke]
    )
    assert pooled == [f"20261201T04000{i}Z-old" for i in range(len(leaves))]


def test_a_run_recorded_before_budgets_had_names_keeps_its_smoke_budget():
    # options.smoke alone says smoke; no name and no GPU plan: cpu; a GPU plan: full.
    assert run_budget({"options": {"smoke": True}}) == "smoke"
    gpu_plan = {"hardware": {"plan": {"num_gpus_per_learner": 1}}}
    assert run_budget({"options": {"smoke": True}} | gpu_plan) == "smoke"
    assert run_budget({"options": {"smoke": False}}) == "cpu"
    assert run_budget({"options": {}} | gpu_plan) == "full"
    assert run_budget({"options": {"smoke": False, "budget": "full"}}) == "full"
