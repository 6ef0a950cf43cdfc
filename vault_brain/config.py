"""Settings: defaults < the user's config.toml < the vault's (or --config) < VAULT_BRAIN_*
environment < CLI flags, validated at once.

One Settings object is built at the edge (CLI, server) and passed down; nothing deeper
reads the environment. Every key is documented in the annotated `config.toml` at the
repository root.

A vault's own `.vault-brain/config.toml` travels with the vault (a clone, a shared or synced
folder), so whoever can change the vault can change it. It may tune how the vault is read
and searched, but settings that send note text off the machine, open the server to the
network or write outside the vault are refused from it unless the user trusts that exact
file (`vault-brain trust`, which records its hash in the per-user config folder). The
user's own config, --config, the environment and flags are trusted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vault_brain.contract import FUSIONS, MODES
from vault_brain.errors import ConfigError

INDEX_DIR = ".vault-brain"  # the vault's own folder: its config.toml, the note history, locks
CONFIG_NAME = "config.toml"
INDEX_FILE = "index.db"
INDEXES_DIR = "indexes"  # under the user's cache folder: one folder per vault
VAULT_MARKER = "vault.txt"  # in a vault's index folder: the vault it belongs to
CANDIDATES_MIN, CANDIDATES_MAX = 10, 5_000  # search.candidates: chunks per arm
# search.keep_warm: a vault's own config may set it, so not a process that never leaves.
KEEP_WARM_MAX = 86_400
USER_DIR_NAME = "vault-brain"  # under $XDG_CONFIG_HOME, ~/.config, or %APPDATA%
TRUST_NAME = "trusted.json"
REMOTE_PROVIDERS = ("ollama", "openai")


@dataclass
class VaultSettings:
    path: str = ""
    ignore: list[str] = field(default_factory=list)
    max_file_bytes: int = 5_000_000
    follow_outside: list[str] = field(default_factory=list)  # folders symlinks may lead into


@dataclass
class IndexSettings:
    # Where the index lives: a path to its SQLite file, or a server's URL (scheme://...)
    # for a backend that has one. Empty: index.path, else the vault's own folder in the
    # user's cache (Settings.default_index_path), never inside the vault.
    url: str = ""
    path: str = ""  # the older name of a file path (index.url wins when both are set)
    fresh_read_seconds: float = 2.0


@dataclass
class ChunkSettings:
    max_tokens: int = 400
    overlap: int = 48
    min_tokens: int = 64


@dataclass
class EmbedSettings:
    provider: str = "local"  # local | ollama | openai | none
    model: str = ""  # local: bundled model unless a model2vec path or id is given
    base_url: str = ""
    api_key_env: str = ""
    dimension: int = 0  # 0: probe once
    batch_size: int = 64
    concurrency: int = 2
    timeout_seconds: float = 30.0
    # The strong tier beside the local model: multilingual-e5-small in-process (e5) or none.
    strong: str = "e5"
    strong_max_tokens: int = 128  # its window per chunk, in its own tokens (measured)
    # Where models keep what they build at load (the e5 graph). Empty: the user's cache
    # folder (user_cache_dir). Never inside the vault: whatever runs as the model must live
    # where only this user writes.
    cache_dir: str = ""


@dataclass
class SearchSettings:
    mode: str = "hybrid"  # hybrid | fts | vector
    fusion: str = "adaptive"  # adaptive | convex | rrf
    vector_weight: float = 0.4
    rrf_k: int = 60
    limit: int = 8
    min_score: float = 0.15  # hits scoring lower are not returned (calibrated scores)
    candidates: int = 150  # chunks each arm retrieves for fusion (at least 15 per hit asked)
    # Seconds a warm resident started by a CLI search stays without a request (0: none).
    keep_warm: int = 300


@dataclass
class TextSettings:
    # Languages of the vault's notes (ISO codes: "en", "de", ...). Empty: detect each
    # note's language. Else detection chooses among these where they cover a note's script,
    # and the first one is used when a note shows no language at all.
    languages: list[str] = field(default_factory=list)
    # A note's full-text score: (1 - w) * its best chunk + w * the whole note (bm25 each).
    note_weight: float = 0.3


@dataclass
class SummarySettings:
    provider: str = "none"  # none | ollama | openai
    model: str = ""
    base_url: str = ""
    api_key_env: str = ""
    max_chars: int = 300
    write_back: bool = False
    timeout_seconds: float = 60.0


@dataclass
class WriteSettings:
    read_only: bool = False
    allowed_folders: list[str] = field(default_factory=list)  # empty: the whole vault
    reject_secrets: bool = True
    max_content_chars: int = 200_000


@dataclass
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str = ""
    max_body_bytes: int = 1_000_000
    # Host / Origin values accepted besides the loopback names and the bind address.
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    # Slow clients: a request's headers / body must arrive within these; connections beyond
    # the cap push out the oldest idle one (or are refused).
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0
    max_connections: int = 100


@dataclass
class WatchSettings:
    debounce_ms: int = 200
    poll: bool = False
    poll_interval_seconds: float = 1.0


@dataclass
class Settings:
    vault: VaultSettings = field(default_factory=VaultSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    chunk: ChunkSettings = field(default_factory=ChunkSettings)
    embed: EmbedSettings = field(default_factory=EmbedSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    text: TextSettings = field(default_factory=TextSettings)
    summary: SummarySettings = field(default_factory=SummarySettings)
    write: WriteSettings = field(default_factory=WriteSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)
    # vault-brain's folder in the user's cache (user_cache_dir), filled by load_settings
    # from the environment; not a config key.
    cache_home: str = ""

    @property
    def vault_path(self) -> Path:
        return Path(self.vault.path).expanduser().resolve()

    @property
    def index_location(self) -> str:
        """Where the index lives: a server URL as index.url gives it, else the absolute
        path of the index file (index/factory.py opens the backend it names)."""
        value = self.index.url or self.index.path
        return value if is_server_url(value) else str(self.index_path)

    @property
    def index_path(self) -> Path | None:
        """The index file (default: default_index_path); None when index.url names a
        server."""
        value = self.index.url or self.index.path
        if is_server_url(value):
            return None
        if value:
            return Path(value).expanduser().resolve()
        return self.default_index_path

    @property
    def index_is_default(self) -> bool:
        """No index.url or index.path: the index lives in the vault's cache folder."""
        return not (self.index.url or self.index.path)

    @property
    def default_index_path(self) -> Path:
        """<user cache>/indexes/<vault name>-<hash of its resolved path>/index.db: out of
        the folder people sync (a SQLite file copied mid-write is a damaged one), one
        folder per vault (VAULT_MARKER in it names the vault)."""
        home = Path(self.cache_home) if self.cache_home else user_cache_dir(os.environ)
        return vault_index_dir(home, self.vault_path) / INDEX_FILE

    @property
    def vault_index_path(self) -> Path:
        """Where earlier versions kept the index, <vault>/.vault-brain/index.db: one found
        there is moved out once (index/sqlite/place.py)."""
        return self.vault_path / INDEX_DIR / INDEX_FILE


def vault_index_dir(cache_home: Path, vault: Path) -> Path:
    """A vault's index folder under vault-brain's cache folder: named after the vault's
    folder (for a person looking), with a hash of its resolved path (two vaults of one
    name never share one)."""
    digest = hashlib.sha256(str(vault).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = re.sub(r"[^\w.-]+", "-", vault.name).strip("-.")[:40] or "vault"
    return cache_home / INDEXES_DIR / f"{name}-{digest}"


def is_server_url(location: str) -> bool:
    """An index location that names a server (`postgresql://...`), not a file path."""
    return "://" in location


CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("embed", "provider"): ("local", "ollama", "openai", "none"),
    ("embed", "strong"): ("e5", "none"),
    ("search", "mode"): MODES,
    ("search", "fusion"): FUSIONS,
    ("summary", "provider"): ("none", "ollama", "openai"),
}

# Shortcuts people type most; the long form VAULT_BRAIN_<SECTION>_<KEY> works for every key.
ENV_SHORTCUTS = {
    "VAULT_BRAIN_VAULT": ("vault", "path"),
    "VAULT_BRAIN_TOKEN": ("server", "token"),
}


def _coerce(value: Any, kind: type, where: str, problems: list[str]) -> Any:
    """Turn a TOML value or an environment string into the field's type, or note why not."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            return str(value)
        if kind is list:
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return list(value)
            raise ValueError
    except (TypeError, ValueError):
        pass
    problems.append(f"{where}: expected {kind.__name__}, got {value!r}")
    return None


def _field_kinds(section: Any) -> dict[str, type]:
    kinds = {}
    for f in dataclasses.fields(section):
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        kinds[f.name] = {"str": str, "int": int, "float": float, "bool": bool}.get(
            t, list if t.startswith("list") else str
        )
    return kinds


def _apply(
    settings: Settings,
    values: Mapping[str, Mapping[str, Any]],
    origin: str,
    problems: list[str],
    sources: dict[tuple[str, str], str] | None = None,
    tag: str = "",
) -> None:
    for section_name, section_values in values.items():
        section = getattr(settings, section_name, None)
        if section is None or not dataclasses.is_dataclass(section):
            problems.append(f"{origin}: unknown section [{section_name}]")
            continue
        if not isinstance(section_values, Mapping):
            problems.append(f"{origin}: [{section_name}] must be a table")
            continue
        kinds = _field_kinds(section)
        for key, raw in section_values.items():
            if key not in kinds:
                problems.append(f"{origin}: unknown key {section_name}.{key}")
                continue
            value = _coerce(raw, kinds[key], f"{origin}: {section_name}.{key}", problems)
            if value is not None:
                setattr(section, key, value)
                if sources is not None:
                    sources[(section_name, key)] = tag


def _env_values(env: Mapping[str, str], settings: Settings) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    sections = {f.name for f in dataclasses.fields(settings)}
    for name, value in env.items():
        if not name.startswith("VAULT_BRAIN_"):
            continue
        if name in ENV_SHORTCUTS:
            section, key = ENV_SHORTCUTS[name]
        else:
            rest = name[len("VAULT_BRAIN_") :].lower()
            section, _, key = rest.partition("_")
            if section not in sections or not key:
                continue  # not ours (e.g. VAULT_BRAIN_CONFIG); unknown names are not errors
        out.setdefault(section, {})[key] = value
    return out


def _validate(s: Settings, problems: list[str]) -> None:
    for (section, key), allowed in CHOICES.items():
        value = getattr(getattr(s, section), key)
        if value not in allowed:
            problems.append(f"{section}.{key}: {value!r} is not one of {', '.join(allowed)}")
    positive = [
        ("vault", "max_file_bytes"),
        ("chunk", "max_tokens"),
        ("embed", "batch_size"),
        ("embed", "concurrency"),
        ("embed", "timeout_seconds"),
        ("search", "rrf_k"),
        ("search", "limit"),
        ("summary", "max_chars"),
        ("write", "max_content_chars"),
        ("server", "max_body_bytes"),
        ("server", "header_timeout_seconds"),
        ("server", "body_timeout_seconds"),
        ("server", "max_connections"),
        ("summary", "timeout_seconds"),
        ("watch", "poll_interval_seconds"),
    ]
    for section, key in positive:
        if getattr(getattr(s, section), key) <= 0:
            problems.append(f"{section}.{key}: must be greater than 0")
    for section, key in [
        ("chunk", "overlap"),
        ("chunk", "min_tokens"),
        ("embed", "dimension"),
        ("watch", "debounce_ms"),
        ("index", "fresh_read_seconds"),
    ]:
        if getattr(getattr(s, section), key) < 0:
            problems.append(f"{section}.{key}: must be 0 or more")
    if not 16 <= s.embed.strong_max_tokens <= 512:
        problems.append("embed.strong_max_tokens: must be between 16 and 512")
    if s.chunk.overlap >= s.chunk.max_tokens:
        problems.append("chunk.overlap: must be smaller than chunk.max_tokens")
    if s.text.languages:  # the analysers' import (regex, stemmers) only when there is a list
        s.text.languages = _known_languages(s.text.languages, problems)
    if not 0.0 <= s.text.note_weight <= 1.0:
        problems.append("text.note_weight: must be between 0 and 1")
    if not 0.0 <= s.search.vector_weight <= 1.0:
        problems.append("search.vector_weight: must be between 0 and 1")
    if not 0 <= s.search.keep_warm <= KEEP_WARM_MAX:
        problems.append(f"search.keep_warm: must be between 0 and {KEEP_WARM_MAX} (a day)")
    if not CANDIDATES_MIN <= s.search.candidates <= CANDIDATES_MAX:
        problems.append(f"search.candidates: must be between {CANDIDATES_MIN} and {CANDIDATES_MAX}")
    if not 0 < s.server.port < 65536:
        problems.append(f"server.port: {s.server.port} is not a TCP port")
    if s.embed.provider in ("ollama", "openai") and not s.embed.base_url:
        problems.append(f"embed.base_url: required when embed.provider = {s.embed.provider!r}")
    if s.summary.provider in ("ollama", "openai"):
        if not s.summary.base_url:
            problems.append(
                f"summary.base_url: required when summary.provider = {s.summary.provider!r}"
            )
        if not s.summary.model:
            problems.append("summary.model: required when a summary provider is set")
    if s.embed.provider in ("ollama", "openai") and not s.embed.model:
        problems.append("embed.model: required for a remote embedding provider")
    if not s.vault.path:
        problems.append("vault.path: no vault given (use --vault PATH or VAULT_BRAIN_VAULT)")
    elif not Path(s.vault.path).expanduser().is_dir():
        problems.append(f"vault.path: {s.vault.path} is not a folder")


def _known_languages(raw_codes: list[str], problems: list[str]) -> list[str]:
    """text.languages as codes the analysers know, each once; unknown ones are problems."""
    from vault_brain.text.analysis import LANGUAGES, normalize_language

    languages: list[str] = []
    for raw in raw_codes:
        code = normalize_language(raw)
        if code is None:
            problems.append(
                f"text.languages: {raw!r} is not a language code vault-brain knows "
                f"({' '.join(sorted(LANGUAGES))})"
            )
        elif code not in languages:
            languages.append(code)
    return languages


def is_loopback(host: str) -> bool:
    """localhost or a loopback IP (any spelling: 127.0.0.2, ::1, 0:0:0:0:0:0:0:1)."""
    if host.strip().rstrip(".").lower() in ("localhost", "127.0.0.1", "::1", "[::1]"):
        return True  # the defaults, without ipaddress (a one-shot search pays each import)
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def user_config_dir(env: Mapping[str, str]) -> Path | None:
    """The per-user config folder: $XDG_CONFIG_HOME/vault-brain, else ~/.config/vault-brain
    (macOS and Linux alike), else %APPDATA%\\vault-brain; None when the environment names no
    home (then there is no user config and nothing can be trusted)."""
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]).expanduser() / USER_DIR_NAME
    if env.get("HOME"):
        return Path(env["HOME"]).expanduser() / ".config" / USER_DIR_NAME
    if env.get("APPDATA"):
        return Path(env["APPDATA"]) / USER_DIR_NAME
    return None


def user_cache_dir(env: Mapping[str, str]) -> Path:
    """vault-brain's folder in the user's cache: $XDG_CACHE_HOME/vault-brain, else
    ~/Library/Caches/vault-brain on macOS, %LOCALAPPDATA%\\vault-brain on Windows,
    ~/.cache/vault-brain elsewhere (the home from HOME, else the account's)."""
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / USER_DIR_NAME
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / USER_DIR_NAME
    try:
        home = Path(env["HOME"]).expanduser() if env.get("HOME") else Path.home()
    except (RuntimeError, KeyError):
        import tempfile  # (and random): rarely needed, so not at every command's start

        return Path(tempfile.gettempdir()) / f"{USER_DIR_NAME}-cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / USER_DIR_NAME
    return home / ".cache" / USER_DIR_NAME


def vault_config_path(vault: str | Path) -> Path:
    """<vault>/.vault-brain/config.toml (the folder resolved, the file itself not: a
    symlinked config file is judged by its content)."""
    return Path(vault).expanduser().resolve() / INDEX_DIR / CONFIG_NAME


# ---- what a vault's own config may set ----

# Whole sections that only change how the vault is read, chunked, searched and watched.
VAULT_SAFE_SECTIONS = frozenset({"chunk", "search", "watch"})
# Single keys that are harmless whatever their value (others are judged by value below;
# a key added later is refused from an untrusted vault config until it is listed here).
VAULT_SAFE_KEYS = frozenset(
    {
        ("vault", "ignore"),
        ("vault", "max_file_bytes"),
        ("index", "fresh_read_seconds"),
        ("embed", "dimension"),
        ("embed", "batch_size"),
        ("embed", "concurrency"),
        ("embed", "timeout_seconds"),
        ("embed", "strong"),  # in-process: nothing leaves the machine
        ("embed", "strong_max_tokens"),
        ("summary", "model"),  # used only with a remote provider, which needs trust
        ("summary", "max_chars"),
        ("summary", "write_back"),
        ("summary", "timeout_seconds"),
        ("write", "read_only"),
        ("write", "allowed_folders"),
        ("write", "reject_secrets"),
        ("write", "max_content_chars"),
        ("server", "port"),
        ("server", "max_body_bytes"),
        ("server", "header_timeout_seconds"),
        ("server", "body_timeout_seconds"),
        ("server", "max_connections"),
    }
)


def needs_trust(section: str, key: str, s: Settings) -> str | None:
    """Why a vault's own config may not set section.key to its value in `s` (None: it may)."""
    value = getattr(getattr(s, section), key)
    if key == "provider" and section in ("embed", "summary"):
        return f"sends note text to {section}.base_url" if value in REMOTE_PROVIDERS else None
    if key == "base_url":
        return "is a server that would receive your notes' text" if value else None
    if key == "api_key_env":
        return "chooses which environment variable is sent as an API key" if value else None
    if (section, key) == ("embed", "model"):
        if value and s.embed.provider == "local":
            return "makes the local embedder load a model from a path or download one"
        return None
    if section == "index" and key in ("url", "path"):
        if not value:
            return None
        if is_server_url(value):
            return "sends your notes' text to the index server it names"
        if _inside(Path(value).expanduser().resolve(), s.vault_path / INDEX_DIR):
            return None
        return "puts the index (which vault-brain writes) outside the vault's .vault-brain folder"
    if (section, key) == ("vault", "follow_outside"):
        return "lets symlinks in the vault lead to files outside it" if value else None
    if (section, key) == ("server", "host"):
        return None if is_loopback(value) else "opens the server to the network"
    if (section, key) == ("server", "token"):
        return "is a server token that whoever wrote this file knows" if value else None
    if section == "server" and key in ("allowed_hosts", "allowed_origins"):
        return "lets other hosts or web pages reach the server" if value else None
    if section in VAULT_SAFE_SECTIONS or (section, key) in VAULT_SAFE_KEYS:
        return None
    return "is not among the settings a vault's own config may set"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _shown(section: str, key: str, s: Settings) -> str:
    if key == "token":
        return "(hidden)"
    value = getattr(getattr(s, section), key)
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _untrusted(s: Settings, sources: Mapping[tuple[str, str], str], path: Path) -> list[str]:
    """One line per key whose value came from the vault's config and needs trust."""
    lines = []
    for (section, key), tag in sources.items():
        if tag != "vault":
            continue
        reason = needs_trust(section, key, s)
        if reason:
            lines.append(f"{path} sets {section}.{key} = {_shown(section, key, s)}, which {reason}")
    return lines


# ---- trust records: the hashes of vault configs the user has trusted ----


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _trust_file(env: Mapping[str, str]) -> Path | None:
    folder = user_config_dir(env)
    return None if folder is None else folder / TRUST_NAME


def _read_trust(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    path = _trust_file(env)
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # unreadable: nothing is trusted, and the refusal says how to trust again
    configs = data.get("configs") if isinstance(data, dict) else None
    return {k: v for k, v in (configs or {}).items() if isinstance(v, dict)}


def _write_trust(env: Mapping[str, str], configs: Mapping[str, Mapping[str, str]]) -> Path:
    path = _trust_file(env)
    if path is None:
        raise ConfigError(
            ["no per-user config folder to record trust in: set HOME (or XDG_CONFIG_HOME)"]
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = json.dumps({"version": 1, "configs": configs}, indent=2, sort_keys=True) + "\n"
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".trusted-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class TrustReport:
    config: Path  # the vault config trusted (or no longer trusted)
    record: Path  # the per-user file that holds the hash
    sha256: str
    needs_trust: list[str]  # what in it needed trust (may be empty)


def trust_vault_config(vault: str, env: Mapping[str, str] | None = None) -> TrustReport:
    """Trust <vault>/.vault-brain/config.toml as it is now: its sha256 goes into the per-user
    trusted.json, and load_settings then accepts every key in it until the file changes."""
    env = os.environ if env is None else env
    config = vault_config_path(vault)
    try:
        raw = config.read_bytes()
    except FileNotFoundError:
        raise ConfigError([f"{config} does not exist: nothing to trust"]) from None
    if _trust_file(env) is None:
        raise ConfigError(
            ["no per-user config folder to record trust in: set HOME (or XDG_CONFIG_HOME)"]
        )
    review = _review(vault, raw, env)
    configs = _read_trust(env)
    digest = _sha256(raw)
    configs[str(config)] = {"sha256": digest, "trusted_at": _now()}
    record = _write_trust(env, configs)
    return TrustReport(config, record, digest, review)


def revoke_trust(vault: str, env: Mapping[str, str] | None = None) -> TrustReport | None:
    """Forget the trust in a vault's config; None when it was not trusted."""
    env = os.environ if env is None else env
    config = vault_config_path(vault)
    configs = _read_trust(env)
    entry = configs.pop(str(config), None)
    if entry is None:
        return None
    record = _write_trust(env, configs)
    return TrustReport(config, record, str(entry.get("sha256", "")), [])


def _review(vault: str, raw: bytes, env: Mapping[str, str]) -> list[str]:
    """What in these vault-config bytes would need trust, over the defaults and the user's
    config (the environment and flags are left out: they change from run to run)."""
    problems: list[str] = []
    settings = Settings()
    user = user_config_dir(env)
    if user is not None and (user / CONFIG_NAME).is_file():
        data, _ = _read_toml(user / CONFIG_NAME, problems)
        _apply(settings, data, str(user / CONFIG_NAME), problems)
    sources: dict[tuple[str, str], str] = {}
    import tomllib  # only where a config file is read: most searches have none

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{vault_config_path(vault)}: not valid TOML ({exc})"]) from None
    _drop_vault_path(data, vault_config_path(vault), [])  # never used from a vault's config
    _apply(settings, data, "vault config", problems, sources, "vault")
    settings.vault.path = str(Path(vault).expanduser().resolve())
    return _untrusted(settings, sources, vault_config_path(vault))


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the index folder: written by vault-brain, so it must stay inside the vault ----


def _index_location_problems(s: Settings) -> list[str]:
    """The vault's folder must not be a symbolic link (vault-brain writes note history and
    locks there), nor may an index kept inside it be written through links to elsewhere.
    Only checked when the index location is not the user's own choice."""
    folder = s.vault_path / INDEX_DIR
    fix = (
        "if you want the index elsewhere, set index.url (or index.path) in your own config "
        "(or VAULT_BRAIN_INDEX_URL)"
    )
    if folder.is_symlink():
        return [
            f"{folder} is a symbolic link (to {os.readlink(folder)}): vault-brain would "
            "write outside the vault there; make it a plain folder"
        ]
    if s.index_path is None or s.index_is_default:
        return []  # a server, or the vault's folder in the user's cache
    given = os.path.abspath(Path(s.index.url or s.index.path).expanduser())
    if os.path.commonpath([given, os.path.abspath(folder)]) != os.path.abspath(folder):
        return []  # a file out of the vault, as given (not where links lead)
    where = Path(given).parent
    if not where.is_dir():
        return []
    try:
        links = sorted(
            e.name for e in os.scandir(where) if e.is_symlink() and e.name != CONFIG_NAME
        )
    except OSError:
        return []
    if not links:
        return []
    return [
        f"{where} holds symbolic links ({', '.join(links[:5])}): vault-brain writes these "
        f"files, and would write through the links to outside the vault; remove them, or {fix}"
    ]


# ---- loading ----


def _read_toml(path: Path, problems: list[str]) -> tuple[dict[str, Any], bytes]:
    import tomllib

    try:
        raw = path.read_bytes()
        return tomllib.loads(raw.decode("utf-8")), raw
    except FileNotFoundError:
        problems.append(f"--config: {path} does not exist")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        problems.append(f"{path}: not valid TOML ({exc})")
    return {}, b""


def _trust_hint(vault: Path, env: Mapping[str, str], changed: bool) -> str:
    user = user_config_dir(env)
    own = f"your own config ({user / CONFIG_NAME}, or --config FILE)" if user else "--config FILE"
    head = (
        "this vault config changed since you trusted it. "
        if changed
        else "a vault's own config is not trusted with these: anyone who can change the vault "
        "can change it. "
    )
    return (
        head + f"If you wrote it, run `vault-brain trust --vault {vault}` once (editing the "
        f"file then needs a new trust), or move these settings to {own} or to "
        "VAULT_BRAIN_<SECTION>_<KEY> environment variables"
    )


def _drop_vault_path(data: dict[str, Any], path: Path, problems: list[str]) -> None:
    """A vault's own config never chooses the vault: it is found inside the vault it belongs
    to, so its `vault.path` can only repeat that folder (harmless, dropped) or name another
    one, which would let whoever wrote it point vault-brain at any folder (`"../.."`) to
    index, serve and write there. That is refused, trusted or not."""
    section = data.get("vault")
    if not isinstance(section, dict) or "path" not in section:
        return
    value = section.pop("path")
    vault = path.parent.parent.resolve()  # <vault>/.vault-brain/config.toml
    if isinstance(value, str) and value:
        named = Path(value).expanduser()
        named = (named if named.is_absolute() else path.parent / named).resolve()
        if named == vault:
            return
    elif value == "":
        return
    problems.append(
        f"{path} sets vault.path = {value!r}: a vault's own config cannot choose the vault "
        f"(it belongs to {vault}); remove that line, and name the vault with --vault, "
        "VAULT_BRAIN_VAULT or your own config"
    )


def load_settings(
    *,
    vault: str | None = None,
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    require_vault: bool = True,
) -> Settings:
    """Build the one Settings object. Raises ConfigError listing every problem at once."""
    env = os.environ if env is None else env
    problems: list[str] = []
    settings = Settings()
    sources: dict[tuple[str, str], str] = {}
    vault = vault or env.get("VAULT_BRAIN_VAULT")
    config_file = config_file or env.get("VAULT_BRAIN_CONFIG")

    def apply_file(path: Path, tag: str) -> bytes:
        data, raw = _read_toml(path, problems)
        if tag == "vault":
            # Not judged when --vault or VAULT_BRAIN_VAULT names the vault: it is not used.
            _drop_vault_path(data, path, [] if vault else problems)
        _apply(settings, data, str(path), problems, sources, tag)
        section = data.get("vault")
        vault_value = section.get("path") if isinstance(section, dict) else None
        if isinstance(vault_value, str) and vault_value and not Path(vault_value).is_absolute():
            # A relative vault path in a config file means relative to that file's folder.
            settings.vault.path = str((path.parent / vault_value).resolve())
        return raw

    user = user_config_dir(env)
    if user is not None and (user / CONFIG_NAME).is_file():
        apply_file(user / CONFIG_NAME, "user")
    vault_config: Path | None = None
    vault_raw = b""
    if config_file:
        apply_file(Path(config_file).expanduser(), "explicit")
    else:
        where = vault or settings.vault.path
        if where and (Path(where).expanduser() / INDEX_DIR / CONFIG_NAME).is_file():
            vault_config = vault_config_path(where)
            vault_raw = apply_file(vault_config, "vault")
    _apply(settings, _env_values(env, settings), "environment", problems, sources, "env")
    if overrides:
        values = {k: v for k, v in overrides.items() if v}
        _apply(settings, values, "command line", problems, sources, "flag")
    if vault:
        settings.vault.path = vault
    if not require_vault and not settings.vault.path:
        settings.vault.path = "."
    _validate(settings, problems)
    if settings.vault.path and Path(settings.vault.path).expanduser().is_dir():
        trusted = False
        if vault_config is not None and vault_raw:
            untrusted = _untrusted(settings, sources, vault_config)
            record = _read_trust(env).get(str(vault_config))
            trusted = (record or {}).get("sha256") == _sha256(vault_raw)
            if untrusted and not trusted:
                problems.extend(untrusted)
                problems.append(_trust_hint(settings.vault_path, env, changed=record is not None))
        index_source = sources.get(("index", "url")) or sources.get(("index", "path"))
        if index_source is None or (index_source == "vault" and not trusted):
            problems.extend(_index_location_problems(settings))
    if problems:
        raise ConfigError(problems)
    settings.vault.path = str(Path(settings.vault.path).expanduser().resolve())
    # The cache folder from `env`, else from this process's environment (as HOME already
    # is): a caller that hands in a bare env still keeps its caches where the process does.
    settings.cache_home = str(user_cache_dir({**os.environ, **env}))
    if not settings.embed.cache_dir:
        settings.embed.cache_dir = settings.cache_home
    return settings
