"""The house rules, enforced: server/ and cli.py go through service.py; only index/'s
backends speak SQL, and the rest sees the index through its port; only vault/ writes into
the vault; leaves import nothing above them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "vault_brain"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _modules(*parts: str) -> list[Path]:
    base = PKG.joinpath(*parts)
    return [base] if base.is_file() else sorted(base.rglob("*.py"))


def test_cli_and_server_reach_the_index_and_vault_only_through_service():
    for path in _modules("cli.py") + _modules("server"):
        bad = {
            m
            for m in _imports(path)
            if m.startswith(("vault_brain.index", "vault_brain.vault", "vault_brain.embed"))
        }
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def _in_sqlite_backend(path: Path) -> bool:
    return path.relative_to(PKG).parts[:2] == ("index", "sqlite")


def test_only_the_sqlite_backend_imports_a_sqlite_binding():
    for path in _modules(""):
        if _in_sqlite_backend(path):
            continue
        bad = {
            m
            for m in _imports(path)
            if m.split(".")[0] in ("sqlite3", "sqlean", "apsw", "sqlite_vec")
        }
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


BACKEND_NAMES = re.compile(r"\b(sqlite3|sqlean|sqlite_vec|apsw|SqliteIndex)\b")


def test_nothing_outside_the_sqlite_backend_names_it():
    """Not even in a docstring or a lazy import: the rest of the code knows an index."""
    for path in _modules(""):
        if _in_sqlite_backend(path):
            continue
        found = sorted(set(BACKEND_NAMES.findall(path.read_text())))
        assert not found, f"{path.relative_to(PKG)} names {found}"


def _uses(path: Path, module: str) -> bool:
    return any(m == module or m.startswith(module + ".") for m in _imports(path))


def test_only_the_factory_opens_a_backend():
    """A backend is a package under index/ that index/factory.py alone opens (by name):
    a new one is a new folder and one line there, and no other file changes."""
    for path in _modules(""):
        rel = path.relative_to(PKG)
        if rel.parts[:2] == ("index", "sqlite"):
            continue
        assert not _uses(path, "vault_brain.index.sqlite"), f"{rel} imports index/sqlite/"
    for path in _modules(""):
        rel = path.relative_to(PKG).as_posix()
        if rel != "service.py" and not rel.startswith("index/"):
            assert not _uses(path, "vault_brain.index.factory"), f"{rel} opens an index itself"


# What code outside index/ may import of it: the port, its records, and the helpers that
# work on any backend (sync, the vector queue, hashes, ...); never a backend.
BACKEND_FREE = {
    f"vault_brain.index.{name}"
    for name in (
        "port",
        "records",
        "sync",
        "vectors",
        "hashes",
        "text",
        "links",
        "chunking",
        "prepare",
        "workers",
        "artifacts",
    )
}


def _index_modules(path: Path) -> set[str]:
    """The index/ modules a file imports (a package import counts as its module)."""
    out = set()
    for m in _imports(path):
        if m.startswith("vault_brain.index."):
            out.add(".".join(m.split(".")[:3]))
    return out


def test_outside_index_only_the_port_and_backend_free_helpers_are_imported():
    for path in _modules(""):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "index":
            continue
        allowed = BACKEND_FREE | (
            {"vault_brain.index.factory"} if rel.name == "service.py" else set()
        )
        bad = _index_modules(path) - allowed
        assert not bad, f"{rel} imports {sorted(bad)}"


def test_search_and_the_indexer_see_the_index_only_through_its_port():
    port = {"vault_brain.index.port", "vault_brain.index.records"}
    allowed = {
        "search": port,
        "indexer.py": port | {"vault_brain.index.sync", "vault_brain.index.vectors"},
        "summarize": port,
    }
    for part, ok in allowed.items():
        for path in _modules(part):
            bad = _index_modules(path) - ok
            assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"
