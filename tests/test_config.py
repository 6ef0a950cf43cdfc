"""Settings: defaults < config.toml < environment < flags; every problem reported at once."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from vault_brain.config import Settings, load_settings
from vault_brain.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_annotated_config_toml_documents_every_key_with_its_default():
    data = tomllib.loads((REPO / "config.toml").read_text())
    defaults = Settings()
    for section in dataclasses.fields(defaults):
        documented = data[section.name]
        values = dataclasses.asdict(getattr(defaults, section.name))
        assert set(documented) == set(values), section.name
        assert documented == values, section.name


def test_environment_overrides_config_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[search]\nmode = "fts"\nlimit = 5\n')
    s = load_settings(
        vault=str(tmp_path), config_file=str(cfg), env={"VAULT_BRAIN_SEARCH_LIMIT": "12"}
    )
    assert (s.search.mode, s.search.limit) == ("fts", 12)


def test_flags_override_environment(tmp_path):
    s = load_settings(
        vault=str(tmp_path),
        env={"VAULT_BRAIN_SERVER_PORT": "9000"},
        overrides={"server": {"port": 9100}},
    )
    assert s.server.port == 9100


def test_config_in_the_vault_index_folder_is_found(tmp_path):
    (tmp_path / ".vault-brain").mkdir()
    (tmp_path / ".vault-brain" / "config.toml").write_text('[embed]\nprovider = "none"\n')
    assert load_settings(vault=str(tmp_path), env={}).embed.provider == "none"


def test_every_invalid_value_is_reported_together(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings(
            vault=str(tmp_path),
            env={
                "VAULT_BRAIN_SEARCH_MODE": "magic",
                "VAULT_BRAIN_CHUNK_MAX_TOKENS": "lots",
                "VAULT_BRAIN_SERVER_PORT": "70000",
            },
        )
    text = str(err.value)
    assert "search.mode" in text and "chunk.max_tokens" in text and "server.port" in text
    assert len(err.value.problems) == 3


def test_unknown_keys_in_a_config_file_are_errors(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[search]\nmodee = 'fts'\n[nonsense]\nx = 1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(tmp_path), config_file=str(cfg), env={})
    assert "search.modee" in str(err.value) and "[nonsense]" in str(err.value)


def test_remote_provider_needs_a_url_and_model(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_EMBED_PROVIDER": "ollama"})
    assert "embed.base_url" in str(err.value) and "embed.model" in str(err.value)


def test_lists_from_the_environment_are_comma_separated(tmp_path):
    s = load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_VAULT_IGNORE": "Templates, *.tmp.md"})
    assert s.vault.ignore == ["Templates", "*.tmp.md"]


def test_index_defaults_to_the_vaults_hidden_folder(tmp_path):
    s = load_settings(vault=str(tmp_path), env={})
    assert s.index_path == tmp_path.resolve() / ".vault-brain" / "index.db"


def test_text_languages_are_normalised_and_unknown_ones_refused(tmp_path):
    s = load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_TEXT_LANGUAGES": "de-DE, English,de"})
    assert s.text.languages == ["de", "en"]
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(tmp_path), env={}, overrides={"text": {"languages": ["xx"]}})
    assert "text.languages" in str(err.value)
