"""Fixtures that build real things: a vault of real files, settings, a Brain over them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.llm_server import FakeLLMServer
from vault_brain.config import Settings, load_settings
from vault_brain.service import Brain

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VAULT_BRAIN_SHARED", REPO.parent / "shared"))
# The index backends the seam, search and sync tests run on (index/factory.py opens each).
BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    """Every index a test makes by default (in the user's cache folder, config.py) goes to
    a folder of this run, removed at its end, never into the real ~/.cache: the process
    environment says so to every Brain and every subprocess. Built model graphs are still
    shared with the real cache folder (a link), so the e5 graph is not rebuilt per run."""
    import tempfile

    from vault_brain.config import user_cache_dir

    real = user_cache_dir(os.environ)
    run = Path(tempfile.mkdtemp(prefix="vb-test-cache-"))
    (run / "vault-brain").mkdir()
    try:
        (real / "models").mkdir(parents=True, exist_ok=True)
        (run / "vault-brain" / "models").symlink_to(real / "models", target_is_directory=True)
    except OSError:
        pass  # no shared model cache: graphs are built in this run's folder
    config.stash[_CACHE_KEY] = (run, os.environ.get("XDG_CACHE_HOME"))
    os.environ["XDG_CACHE_HOME"] = str(run)
    _no_residents(run, config)


def _no_residents(run: Path, config: pytest.Config) -> None:
    """The suite runs hundreds of CLI searches: none of them leaves a warm resident
    (vault_brain/resident.py) unless its test asks for one with VAULT_BRAIN_SEARCH_KEEP_WARM.
    Said by a user config of this run, since most tests drop the VAULT_BRAIN_* variables of
    their own environment before they start a subprocess (and by that variable too, for
    the rest)."""
    user = run / "config"
    (user / "vault-brain").mkdir(parents=True)
    (user / "vault-brain" / "config.toml").write_text("[search]\nkeep_warm = 0\n")
    config.stash[_CONFIG_KEY] = (
        os.environ.get("XDG_CONFIG_HOME"),
        os.environ.get("VAULT_BRAIN_SEARCH_KEEP_WARM"),
    )
    os.environ["XDG_CONFIG_HOME"] = str(user)
    os.environ["VAULT_BRAIN_SEARCH_KEEP_WARM"] = "0"


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for name, value in zip(
        ("XDG_CONFIG_HOME", "VAULT_BRAIN_SEARCH_KEEP_WARM"),
        config.stash.get(_CONFIG_KEY, (None, None)),
        strict=True,
    ):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    run, before = config.stash.get(_CACHE_KEY, (None, None))
    if run is None:
        return
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before
    shutil.rmtree(run, ignore_errors=True)


_CACHE_KEY = pytest.StashKey[tuple]()
_CONFIG_KEY = pytest.StashKey[tuple]()


def shared_path(*parts: str) -> Path:
    """A file under ../shared, or skip the test with the reason."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs {path} (the team's shared corpora/models); not present here")
    return path


class Vault:
    """A temp vault: write notes by relative path, read them back."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, rel: str, text: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    root = tmp_path / "vault"
    root.mkdir()
    return Vault(root)


# --- index backends -----------------------------------------------------------------------


@pytest.fixture
def backend() -> str:
    """The index backend a test's brains use: SQLite, unless its module runs on every
    backend (`backend = every_backend()` at the module's top)."""
    return "sqlite"


def every_backend() -> Callable[..., str]:
    """A `backend` fixture that runs each test of a module once per backend in BACKENDS;
    tests that build no brain run once."""

    @pytest.fixture(params=BACKENDS)
    def backend(request: pytest.FixtureRequest) -> str:
        return request.param

    return backend


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server with pgvector for this test session (tests/pg_server.py),
    or the test skips saying why it cannot start here (VB_REQUIRE_POSTGRES=1: fails). Its
    folder is not under pytest's basetemp, which a concurrent pytest run may prune, and
    keeps the server's socket path short."""
    import shutil
    import tempfile

    from tests.pg_server import start_test_server

    folder = Path(tempfile.mkdtemp(prefix="vb-pg-"))
    try:
        server, url = start_test_server(folder)
    except Exception as exc:  # noqa: BLE001 - any reason is the skip's reason
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("VB_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"no PostgreSQL server for the postgres backend: {exc}")
    yield url
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def index_settings(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[str], dict]:
    """The `[index]` settings of an index of the backend: the vault's own ("") or another
    one by name (a fresh index beside it, to compare a rebuild with). Each Postgres test
    gets schemas of its own on the session's server."""
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        test = uuid.uuid4().hex[:12]

        def schema(name: str = "") -> dict:
            part = "".join(c if c.isalnum() else "_" for c in (name or "vault").lower())
            return {"url": f"{url}&schema=t_{test}_{part}"[:300]}

        return schema

    def make(name: str = "") -> dict:
        if backend == "sqlite":
            return {"path": str(tmp_path / "indexes" / f"{name}.db")} if name else {}
        raise ValueError(f"no test setup for the {backend!r} backend")

    return make


@pytest.fixture
def make_settings(vault: Vault, index_settings: Callable[[str], dict]) -> Callable[..., Settings]:
    def make(**sections: dict) -> Settings:
        sections.setdefault("embed", {"provider": "none"})
        # The strong (e5) tier only where a test asks for it: it costs a model load.
        sections["embed"] = {"strong": "none", **sections["embed"]}
        sections["index"] = {**index_settings(), **sections.get("index", {})}
        return load_settings(vault=str(vault.root), env={}, overrides=sections)

    return make


@pytest.fixture
def make_brain(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., Brain]]:
    """Brains over the vault; each is synced once and closed after the test."""
    brains: list[Brain] = []

    def make(sync: bool = True, **sections: dict) -> Brain:
        brain = Brain(make_settings(**sections))
        brains.append(brain)
        if sync:
            brain.sync()
            brain.embed_pending()
        return brain

    yield make
    for b in brains:
        b.close()


@pytest.fixture
def brain(make_brain: Callable[..., Brain]) -> Brain:
    """A full-text-only brain (fast); tests of vectors ask make_brain for the local model."""
    return make_brain()


@pytest.fixture(scope="module")
def _running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_server(_running_server: FakeLLMServer) -> FakeLLMServer:
    """A real loopback server speaking Ollama and OpenAI (embeddings, chat): one per module
    (starting uvicorn costs time), with fresh switches per test."""
    _running_server.reset()
    return _running_server
