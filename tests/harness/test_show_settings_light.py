"""`--show-settings` answers without importing torch or RLlib (issue 51 item 5): only the
statements RECIPE's budgets, default and headline need run (recipe.budget_declarations).
Checked on every bundled leaf and template by the modules a fresh interpreter holds
afterwards, and its answer checked equal to the one from the fully imported recipe; a recipe
whose budgets change after their definition is imported as a run would, and answers the
same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rl_harness.cli import main
from rl_harness.harness.budgets import resolve_budget, settings_text
from rl_harness.harness.recipe import load_recipe
from rl_harness.harness.scaffold import TEMPLATE_DIR
from tests.study.test_budget_as_recorded import EXAMPLES, LEAVES

# In a fresh interpreter: --show-settings for each target, then the heavy modules imported.
PROBE = """
import contextlib, io, json, sys
from rl_harness.cli import main
HEAVY = ("torch", "ray", "gymnasium")
answers = {}
for target in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([target, "--show-settings", "--set", "iterations=3"])
    answers[target] = [code, out.getvalue()]
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
print(json.dumps({"answers": answers, "heavy": heavy}))
"""


def _probe(targets: list[str], cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *targets],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_show_settings_imports_no_torch_or_rllib_for_any_bundled_recipe(tmp_path):
    template = tmp_path / "experiments" / "hmm_probe_belief.py"
    template.parent.mkdir()
    template.write_text((TEMPLATE_DIR / "hmm_probe_experiment.py.template").read_text())
    training = [str(p) for p in LEAVES if p.parent.name != "synthesis"]
    seen = _probe([*training, str(template)], EXAMPLES)
    assert seen["heavy"] == []
    for target, (code, text) in seen["answers"].items():
        assert code == 0, target
        assert "budgets smoke" in text and " + --set" in text, target
    # The same answer as the recipe imported in full (two of them, torch and all).
    flagship = EXAMPLES / "experiments/mess3_belief_geometry/reward_only/experiment.py"
    for leaf in (LEAVES[0], flagship):
        loaded = load_recipe(str(leaf))
        chosen = resolve_budget(loaded.declared, None, ["iterations=3"], owner=loaded.module_name)
        full = settings_text(loaded.declared, loaded.module_name, chosen)
        assert seen["answers"][str(leaf)][1].strip() == full.strip()


CHANGED_LATER = """
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Budget:
    iterations: int


BUDGETS = {"smoke": Budget(1), "cpu": Budget(5)}
BUDGETS["full"] = replace(BUDGETS["cpu"], iterations=50)
DEFAULT_BUDGET = "cpu"


def run(context):
    return {}


from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


def test_budgets_changed_after_their_definition_are_read_from_the_imported_recipe(tmp_path, capsys):
    leaf = tmp_path / "changed" / "experiment.py"
    leaf.parent.mkdir()
    leaf.write_text(CHANGED_LATER)
    assert main([str(leaf), "--show-settings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "budgets smoke, cpu, full" in lines[0]
    assert lines[2].split() == ["iterations", "int", "1", "5", "50"]
