"""The layout docs/design.md describes, checked on the source: floors that import only
downwards, no import cycles, no module over 400 lines, every public name resolvable, and
citations that stay inside the repository."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

import attnlab
from repo_paths import ROOT

SRC = ROOT / "src" / "attnlab"

# docs/design.md, "The floors": a module may import its own floor's package and the floors below.
FLOORS = [
    ("attnlab", "attnlab.validation", "attnlab.runtime", "attnlab.devices",
     "attnlab.evaluation", "attnlab.atomic", "attnlab.signals", "attnlab.measure",
     "attnlab.memory", "attnlab.parsing", "attnlab.allocator", "attnlab.progress"),
    ("attnlab.attention", "attnlab.checkpoint", "attnlab.visualize", "attnlab.config"),
    ("attnlab.modules", "attnlab.data"),
    ("attnlab.models", "attnlab.generation", "attnlab.training"),
    ("attnlab.interop", "attnlab.analysis", "attnlab.explain"),
    ("attnlab.pipelines",),
    ("attnlab.tasks",),
    ("attnlab.labs",),
    ("attnlab.explorer",),
    ("attnlab.views",),
    ("attnlab.cli",),
]

# The command line is cli/'s alone: a module elsewhere that imports argparse or takes a Namespace
# is allowed only here, with the reason.
COMMAND_LINE_ALLOWED: dict[str, str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """attnlab modules ``path`` imports, anywhere in the file (function-level imports too);
    ``from pkg import sub`` counts as importing ``pkg.sub`` when that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnlab")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnlab"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            found |= subs if len(subs) == len(node.names) else subs | {node.module}
    return found


def unit(name: str) -> str:
    """The floor entry a module belongs to: its subpackage, or the top-level module itself."""
    parts = name.split(".")
    return ".".join(parts[:2])


def floor(name: str) -> int:
    for level, units in enumerate(FLOORS):
        if unit(name) in units:
            return level
    raise AssertionError(f"{name} is on no floor of docs/design.md (add it to FLOORS and the doc)")


GRAPH = {name: imports_of(path) & set(MODULES) - {name} for name, path in MODULES.items()}


def test_every_module_is_on_a_floor():
    for name in MODULES:
        floor(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_the_floors(name):
    for target in GRAPH[name]:
        if unit(target) == unit(name):
            continue
        assert floor(target) < floor(name), (
            f"{name} (floor {floor(name)}) imports {target} (floor {floor(target)}): "
            "a module imports only from the floors below its own"
        )


# docs/design.md, "Three wings": the lecture core defines, the engine runs, the applications use.
WINGS = {
    "foundation": ("attnlab", "attnlab.validation", "attnlab.runtime", "attnlab.devices",
                   "attnlab.evaluation", "attnlab.atomic", "attnlab.signals", "attnlab.measure",
                   "attnlab.memory", "attnlab.parsing", "attnlab.config", "attnlab.checkpoint",
                   "attnlab.visualize", "attnlab.allocator", "attnlab.progress"),
    "lecture core": ("attnlab.attention", "attnlab.modules", "attnlab.models", "attnlab.interop",
                     "attnlab.analysis", "attnlab.explain"),
    "engine": ("attnlab.training", "attnlab.generation", "attnlab.data"),
    "applications": ("attnlab.pipelines", "attnlab.tasks", "attnlab.labs", "attnlab.explorer",
                     "attnlab.views", "attnlab.cli"),
}
ENGINE_SEES = ("attnlab.attention", "attnlab.modules", "attnlab.models.base")  # the seams, never a model


def wing(name: str) -> str:
    return next(w for w, units in WINGS.items() if unit(name) in units)


def test_every_package_is_in_one_wing():
    units = [u for level in FLOORS for u in level]
    assert sorted(units) == sorted(u for group in WINGS.values() for u in group)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_wings_import_as_the_design_says(name):
    """The foundation imports only itself; the lecture core only itself and the foundation;
    the engine runs any model through the core's seams and never names a model; only the
    applications import the applications."""
    allowed = {"foundation": {"foundation"}, "lecture core": {"foundation", "lecture core"},
               "engine": {"foundation", "engine"}, "applications": set(WINGS)}[wing(name)]
    for target in GRAPH[name]:
        seam = wing(name) == "engine" and target.startswith(ENGINE_SEES)
        assert wing(target) in allowed or seam, (
            f"{name} ({wing(name)}) imports {target} ({wing(target)}); docs/design.md, 'Three wings'"
        )


def test_the_tests_mirror_the_source():
    """tests/ holds one folder per package of src/attnlab (the floor-0 modules' tests at its top)."""
    tests = ROOT / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__")}
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= packages, f"test folders without a package: {sorted(folders - packages)}"
    for folder in folders:
        assert list((tests / folder).glob("test_*.py")), f"tests/{folder} holds no tests"


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


def sees_the_command_line(path: Path) -> list[str]:
    """What in ``path`` belongs to the command line: an ``argparse`` import, a ``Namespace``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            found.append(f"line {node.lineno}: import argparse")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.append(f"line {node.lineno}: from argparse import ...")
        elif isinstance(node, ast.Attribute | ast.Name) and "Namespace" in (
                node.attr if isinstance(node, ast.Attribute) else node.id):
            found.append(f"line {node.lineno}: Namespace")
    return found


def test_only_the_cli_sees_argparse_and_its_namespaces():
    """cli/ parses the command line and calls typed functions; no task, pipeline, lab or
    explorer module imports argparse or takes a Namespace (allowed: COMMAND_LINE_ALLOWED)."""
    offenders = {name: sees_the_command_line(path) for name, path in MODULES.items()
                 if unit(name) != "attnlab.cli" and name not in COMMAND_LINE_ALLOWED}
    offenders = {name: found for name, found in offenders.items() if found}
    assert not offenders, f"the command line outside attnlab.cli: {offenders}"
    for name in COMMAND_LINE_ALLOWED:  # an allowance that is no longer needed goes
        assert sees_the_command_line(MODULES[name]), f"{name} no longer needs its allowance"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_400_lines(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"{name} has {lines} lines: split it by concept"


def all_module_names() -> list[str]:
    names = ["attnlab"]
    for info in pkgutil.walk_packages(attnlab.__path__, "attnlab."):
        names.append(info.name)
    return sorted(set(names))


def test_walked_modules_are_the_source_files():
    assert set(all_module_names()) == set(MODULES) - {"attnlab.__main__"}


@pytest.mark.parametrize("name", all_module_names())
def test_every_name_in_every_all_resolves(name):
    module = importlib.import_module(name)
    for public in getattr(module, "__all__", []):
        assert getattr(module, public, None) is not None, f"{name}.__all__ names {public!r}, which is missing"


@pytest.mark.parametrize("package", ["attnlab.attention", "attnlab.modules", "attnlab.models",
                                     "attnlab.generation", "attnlab.interop", "attnlab.modules.positional",
                                     "attnlab.training", "attnlab.data", "attnlab.data.speech",
                                     "attnlab.pipelines",
                                     "attnlab.tasks"])
def test_star_import_works(package):
    namespace: dict = {}
    exec(f"from {package} import *", namespace)
    assert set(importlib.import_module(package).__all__) <= set(namespace)


def test_one_import_path_per_module():
    """No module is a second path to another (``from attnlab.x import *`` under a new name):
    the positional schemes are ``attnlab.modules.positional`` only."""
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stars = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and any(a.name == "*" for a in n.names) and (n.module or "").startswith("attnlab")]
        assert not stars, f"{name} re-exports {stars} under a second path"
    assert importlib.util.find_spec("attnlab.positional") is None


def test_each_model_and_its_config_import_from_attnlab_models():
    from attnlab.models import MODEL_TYPES

    for cls in MODEL_TYPES.values():
        models = importlib.import_module("attnlab.models")
        assert getattr(models, cls.__name__) is cls
        assert getattr(models, cls.config_class.__name__) is cls.config_class


OUTSIDE = re.compile(r"(?<![\w/])DESIGN\.md|shared/seeds|\.\./shared|[Ss]eeds?\s+00[0-4]")
REPO_PATH = re.compile(r"\b((?:docs|configs|benchmarks|tests)/[\w./-]+\.(?:md|toml|py|png))")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_citations_stay_inside_the_repository(name):
    text = MODULES[name].read_text(encoding="utf-8")
    outside = OUTSIDE.findall(text)
    assert not outside, f"{name} cites {outside}: cite docs/design.md and the lectures by title and author"
    for path in REPO_PATH.findall(text):
        assert (ROOT / path).exists(), f"{name} cites {path}, which is not in the repository"


def test_design_document_and_lecture_list_exist():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for floor_units in FLOORS:
        for name in floor_units:
            if name != "attnlab":
                assert name.split(".")[1] in design, f"docs/design.md does not place {name}"
    lectures = (ROOT / "docs" / "lectures.md").read_text(encoding="utf-8")
    for author in ("Li", "Steinert-Threlkeld", "López", "Hasegawa-Johnson", "Ba"):
        assert author in lectures
