"""The house rules, enforced: server/ and cli.py go through service.py; only index/ speaks
SQL; only vault/ writes into the vault."""

from __future__ import annotations

import ast
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


def test_only_index_imports_a_sqlite_binding():
    for path in _modules(""):
        if "index" in path.relative_to(PKG).parts:
            continue
        bad = {
            m
            for m in _imports(path)
            if m.split(".")[0] in ("sqlite3", "sqlean", "apsw", "sqlite_vec")
        }
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_only_vault_writes_files_into_the_vault():
    writers = ("write_text", "write_bytes", "os.replace", "os.rename", "shutil.move", "os.link")
    for path in _modules(""):
        rel = path.relative_to(PKG)
        if (
            rel.parts[0] in ("vault",)
            or rel.name in ("cli.py", "lock.py")
            or rel.parts[0] == "index"
        ):
            continue
        source = path.read_text()
        found = [w for w in writers if w in source]
        assert not found, f"{rel} writes files ({found}); only vault/ may"
