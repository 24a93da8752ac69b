"""Every RLlib hook the library overrides carries `@override(...)`.

RLlib has renamed hooks before (`compute_loss_per_module` became `compute_loss_for_module`);
a mixin left with the old name would silently drop its loss term. `@override(Base)` raises
NameError at import when Base has no such method, so a renamed hook fails loudly, but only
if the decorator is there: this test finds methods that match an RLlib hook by name and lack
it. Checked: every class under src/rl_harness with an RLlib class in its MRO (against the
hooks those RLlib classes define), and every `*Mixin` class meant to be composed with one
(against the hooks of RLModule, Learner and ConnectorV2 and their torch versions).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override

from tests.test_architecture import PACKAGE

MIXIN_TARGETS = (RLModule, TorchRLModule, Learner, TorchLearner, ConnectorV2)


def _is_rllib(cls: type) -> bool:
    return cls.__module__.startswith("ray.rllib.")


def hooks_of(bases: list[type]) -> set[str]:
    """Method names the given RLlib classes define (dunders only if `__call__`)."""
    names = set()
    for base in bases:
        names |= {
            name
            for name, value in vars(base).items()
            if callable(value) or isinstance(value, classmethod | staticmethod)
        }
    return {n for n in names if not (n.startswith("__") and n != "__call__")}


def decorated_methods(source: str) -> dict[str, dict[str, bool]]:
    """{class name: {method name: has @override(...)}} for the classes in `source`."""
    found: dict[str, dict[str, bool]] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        methods = found.setdefault(node.name, {})
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                methods[item.name] = any(
                    isinstance(d, ast.Call)
                    and (getattr(d.func, "id", None) or getattr(d.func, "attr", None)) == "override"
                    for d in item.decorator_list
                )
    return found


def missing_overrides(module_name: str, source: str) -> list[str]:
    """`module.Class.method` for each RLlib hook defined without @override."""
    module = importlib.import_module(module_name)
    missing = []
    for class_name, methods in decorated_methods(source).items():
        cls = getattr(module, class_name, None)
        if not inspect.isclass(cls) or cls.__module__ != module_name:
            continue
        rllib_bases = [b for b in cls.__mro__[1:] if _is_rllib(b)]
        if rllib_bases:
            hooks = hooks_of(rllib_bases)
        elif class_name.endswith("Mixin"):
            hooks = hooks_of([b for t in MIXIN_TARGETS for b in t.__mro__ if _is_rllib(b)])
        else:
            continue
        missing += [
            f"{module_name}.{class_name}.{name}"
            for name, decorated in methods.items()
            if name in hooks and not decorated
        ]
    return missing


def library_modules() -> list[tuple[str, Path]]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules.append((".".join(parts), path))
    return modules


def test_every_overridden_rllib_hook_carries_override():
    missing = []
    for module_name, path in library_modules():
        source = path.read_text(encoding="utf-8")
        if "class " in source and ("Mixin" in source or "ray.rllib" in source):
            missing += missing_overrides(module_name, source)
    assert not missing, "add @override(<RLlib base>) to:\n" + "\n".join(missing)


PLANTED = """
from ray.rllib.core.learner.torch.torch_learner import TorchLearner


class ForgetfulLossMixin:
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        return super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )

    def helper(self):
        return 1


class ForgetfulLearner(TorchLearner):
    def configure_optimizers_for_module(self, module_id, config=None):
        pass
"""


def test_the_check_catches_a_hook_without_override(tmp_path, monkeypatch):
    (tmp_path / "planted_hooks.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert missing_overrides("planted_hooks", PLANTED) == [
        "planted_hooks.ForgetfulLossMixin.compute_loss_for_module",
        "planted_hooks.ForgetfulLearner.configure_optimizers_for_module",
    ]


def test_a_renamed_hook_under_override_fails_at_import():
    # The rename RLlib made once: a mixin still on the old name cannot even be defined.
    with pytest.raises(NameError, match="compute_loss_per_module must override"):

        class StaleLossMixin:
            @override(Learner)
            def compute_loss_per_module(self, *, module_id, config, batch, fwd_out):
                return None
