"""Settings: defaults < config.toml < VAULT_BRAIN_* environment < CLI flags, validated at once.

One Settings object is built at the edge (CLI, server) and passed down; nothing deeper
reads the environment. Every key is documented in the annotated `config.toml` at the
repository root.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vault_brain.errors import ConfigError

INDEX_DIR = ".vault-brain"
CONFIG_NAME = "config.toml"


@dataclass
class VaultSettings:
    path: str = ""
    ignore: list[str] = field(default_factory=list)
    max_file_bytes: int = 5_000_000


@dataclass
class IndexSettings:
    path: str = ""  # default: <vault>/.vault-brain/index.db
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


@dataclass
class SearchSettings:
    mode: str = "hybrid"  # hybrid | fts | vector
    fusion: str = "convex"  # convex | rrf
    vector_weight: float = 0.2
    rrf_k: int = 60
    limit: int = 8


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

    @property
    def vault_path(self) -> Path:
        return Path(self.vault.path).expanduser().resolve()

    @property
    def index_path(self) -> Path:
        if self.index.path:
            return Path(self.index.path).expanduser().resolve()
        return self.vault_path / INDEX_DIR / "index.db"


CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("embed", "provider"): ("local", "ollama", "openai", "none"),
    ("search", "mode"): ("hybrid", "fts", "vector"),
    ("search", "fusion"): ("convex", "rrf"),
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
    settings: Settings, values: Mapping[str, Mapping[str, Any]], origin: str, problems: list[str]
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
    if s.chunk.overlap >= s.chunk.max_tokens:
        problems.append("chunk.overlap: must be smaller than chunk.max_tokens")
    from vault_brain.index.analysis import LANGUAGES, normalize_language

    languages = []
    for raw in s.text.languages:
        code = normalize_language(raw)
        if code is None:
            problems.append(
                f"text.languages: {raw!r} is not a language code vault-brain knows "
                f"({' '.join(sorted(LANGUAGES))})"
            )
        elif code not in languages:
            languages.append(code)
    s.text.languages = languages
    if not 0.0 <= s.text.note_weight <= 1.0:
        problems.append("text.note_weight: must be between 0 and 1")
    if not 0.0 <= s.search.vector_weight <= 1.0:
        problems.append("search.vector_weight: must be between 0 and 1")
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


def find_config(vault: str | None, explicit: str | None) -> Path | None:
    """--config wins; else <vault>/.vault-brain/config.toml when it exists."""
    if explicit:
        return Path(explicit).expanduser()
    if vault:
        candidate = Path(vault).expanduser() / INDEX_DIR / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


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
    vault = vault or env.get("VAULT_BRAIN_VAULT")
    config_file = config_file or env.get("VAULT_BRAIN_CONFIG")
    path = find_config(vault, config_file)
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"--config: {path} does not exist")
            data = {}
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            problems.append(f"{path}: not valid TOML ({exc})")
            data = {}
        _apply(settings, data, str(path), problems)
    _apply(settings, _env_values(env, settings), "environment", problems)
    if overrides:
        _apply(settings, {k: v for k, v in overrides.items() if v}, "command line", problems)
    if vault:
        settings.vault.path = vault
    if settings.vault.path and path is not None and not Path(settings.vault.path).is_absolute():
        # A relative vault path in a config file means relative to that file's folder.
        if "vault" in (data if path is not None else {}) and not vault:
            settings.vault.path = str((path.parent / settings.vault.path).resolve())
    if not require_vault and not settings.vault.path:
        settings.vault.path = "."
    _validate(settings, problems)
    if problems:
        raise ConfigError(problems)
    settings.vault.path = str(Path(settings.vault.path).expanduser().resolve())
    return settings
