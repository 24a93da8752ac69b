"""The loose-keyword path of the probe entry points is gone (issue 48 item 5): each takes one
`ProbeSettings`, and loose probe keywords, a missing record or another object are refused
with a TypeError naming ProbeSettings (the check runs before any module or rollout is
touched, so the placeholders below are never read)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import rl_harness.analysis.probes as probes
from rl_harness.analysis import (
    ProbeSettings,
    evaluate_probe,
    probe_checkpoints,
    probe_checkpoints_closed_loop,
    probe_layers,
)
from rl_harness.analysis.layer_probes import probe_named
from rl_harness.analysis.probes import settings as settings_module

X = np.random.default_rng(0).normal(size=(8, 5, 3))
Y = X[..., :2] * 2.0 + 1.0
CALLS = {
    "evaluate_probe": lambda s, **kw: evaluate_probe(X, Y, s, **kw),
    "probe_named": lambda s, **kw: probe_named({"x": X}, Y, s, **kw),
    "probe_layers": lambda s, **kw: probe_layers(None, None, s, **kw),  # type: ignore[arg-type]
    "probe_checkpoints": lambda s, **kw: probe_checkpoints([], None, s, **kw),  # type: ignore[arg-type]
    "probe_checkpoints_closed_loop": lambda s, **kw: probe_checkpoints_closed_loop(
        [], lambda module: None, s, **kw
    ),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(CALLS))
def test_loose_probe_keywords_are_refused_naming_probe_settings(name) -> None:
    call = CALLS[name]
    with pytest.raises(TypeError, match=rf"{name}\(\) takes .*ProbeSettings.*\(branch_k, seed\)"):
        call(None, seed=0, branch_k=2)
    with pytest.raises(TypeError, match=r"ProbeSettings.*\(ridge\)"):
        call(ProbeSettings(seed=0), ridge=1.0)  # not even beside a record
    with pytest.raises(TypeError, match=rf"{name}\(\) needs settings=ProbeSettings"):
        call(None)
    with pytest.raises(TypeError, match=r"needs settings=ProbeSettings.*got dict"):
        call({"seed": 0})


def test_the_compatibility_function_is_gone_and_a_record_still_works() -> None:
    assert not hasattr(settings_module, "probe_settings")
    assert "probe_settings" not in probes.__all__
    settings = ProbeSettings(seed=3, n_bootstrap=20)
    evaluation = evaluate_probe(X, Y, settings)
    assert evaluation.settings is settings
    assert evaluation.report.r2_pooled.value == pytest.approx(1.0, abs=1e-9)


ENTRY_POINTS = set(CALLS)
PROBE_FIELDS = {field.name for field in dataclasses.fields(ProbeSettings)} | {"branch_k"}
ROOT = Path(__file__).resolve().parents[2]


def test_no_caller_in_the_repository_passes_loose_probe_keywords() -> None:
    """Every call of an entry point in src/, the experiment repo and the tests hands over a
    ProbeSettings (a merge that brings back a loose call fails here, not in a study run)."""
    loose = []
    for folder in ("src", "examples", "tests", "bench", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ".venv" in path.parts or path == Path(__file__).resolve():
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in ENTRY_POINTS and any(k.arg in PROBE_FIELDS for k in node.keywords):
                    loose.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not loose, f"loose probe keywords in: {loose}"
