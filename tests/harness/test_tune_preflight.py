"""`run_tune` checks the recipe before Ray starts (issue 49, class 5): a model_config typo in
a Tune recipe is one `rl-harness: error:` line, exit code 2, and the run never asked for
Ray (the harness's one way to start or join it, `rayinit.start_ray`, is watched). Through
the CLI, on the real MESS3 next-token recipe's config."""

from __future__ import annotations

from rl_harness.cli import main
from tests.tools.helpers import error_line, run_dirs, write_leaf

# The real MESS3 next-token recipe's config, one key misspelt, under Tune.
TUNE_TYPO = """
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from experiments.mess3_next_token.reward_only import experiment as real
from rl_harness import run_tune

def run(context):
    config = real.build_config(real.SMOKE)
    spec = real.module_spec()
    config.rl_module(rl_module_spec=RLModuleSpec(
        module_class=spec.module_class,
        model_config={**spec.model_config, "hiden_size": 8},
    ))
    run_tune(config, context, stop=1)
"""


def test_a_tune_recipe_typo_is_one_line_before_ray(git_repo, capsys, monkeypatch):
    import rl_harness.harness.rayinit as rayinit

    started: list[str | None] = []  # every Ray start (or connect) the run asks for
    monkeypatch.setattr(rayinit, "start_ray", started.append)
    repo, _ = git_repo
    leaf = write_leaf(repo, TUNE_TYPO)
    assert main([str(leaf), "--no-upload-artifacts"]) == 2
    line = error_line(capsys)
    assert "unknown model_config key 'hiden_size'" in line
    assert started == [], "Ray was started before the preflight checks"
    # A preflight refusal leaves no run folder (issue 51), and no Ray logs anywhere.
    assert run_dirs(leaf) == []
    assert not list((leaf.parent / "artifacts").glob("*/ray_logs"))
