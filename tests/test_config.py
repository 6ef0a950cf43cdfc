"""Settings: defaults < config.toml < environment < flags; every problem reported at once."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from vault_brain.config import Settings, load_settings, revoke_trust, trust_vault_config
from vault_brain.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_annotated_config_toml_documents_every_key_with_its_default():
    data = tomllib.loads((REPO / "config.toml").read_text())
    defaults = Settings()
    for section in dataclasses.fields(defaults):
        if not dataclasses.is_dataclass(getattr(defaults, section.name)):
            continue  # cache_home: filled from the environment, not a config key
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


def test_index_defaults_to_the_vaults_own_folder_in_the_users_cache(tmp_path):
    s = load_settings(vault=str(tmp_path), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    folder = s.index_path.parent
    assert s.index_path.name == "index.db" and s.index_is_default
    assert folder.parent == tmp_path / "cache" / "vault-brain" / "indexes"
    assert folder.name.startswith(tmp_path.name[:20])  # readable: the vault's folder name


# ---- a vault's own config is not trusted with what leaves the machine or the vault ----


def vault_config(vault: Path, text: str) -> Path:
    (vault / ".vault-brain").mkdir(exist_ok=True)
    path = vault / ".vault-brain" / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def user_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose per-user config folder is a temp folder."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_a_vault_config_may_set_harmless_keys(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(
        vault,
        '[vault]\nignore = ["Templates"]\n[chunk]\nmax_tokens = 200\n[search]\nmode = "fts"\n'
        '[embed]\nprovider = "none"\n[server]\nhost = "127.0.0.1"\nport = 9001\n'
        "[write]\nread_only = true\n",
    )
    s = load_settings(vault=str(vault), env=user_env(tmp_path))
    assert (s.vault.ignore, s.chunk.max_tokens, s.search.mode) == (["Templates"], 200, "fts")
    assert (s.embed.provider, s.server.port, s.write.read_only) == ("none", 9001, True)


REMOTE = '[embed]\nprovider = "ollama"\nbase_url = "http://203.0.113.9:11434"\nmodel = "m"\n'


def test_a_vault_config_that_sends_note_text_elsewhere_is_refused_saying_how_to_trust(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, REMOTE)
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(vault), env=user_env(tmp_path))
    text = str(err.value)
    assert "embed.base_url" in text and "embed.provider" in text
    assert f"vault-brain trust --vault {vault.resolve()}" in text
    assert str(tmp_path / "xdg" / "vault-brain" / "config.toml") in text


def test_a_vault_config_that_opens_the_server_is_refused_without_showing_the_token(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, '[server]\nhost = "0.0.0.0"\ntoken = "author-knows-this"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(vault), env=user_env(tmp_path))
    text = str(err.value)
    assert "server.host" in text and "server.token" in text
    assert "author-knows-this" not in text


@pytest.mark.parametrize(
    "text",
    [
        '[summary]\nprovider = "openai"\nbase_url = "http://x/v1"\nmodel = "m"\n',
        '[embed]\napi_key_env = "AWS_SECRET_ACCESS_KEY"\n',
        '[embed]\nmodel = "/home/someone/models/x"\n',
        '[server]\nallowed_hosts = ["attacker.example"]\n',
        '[server]\nallowed_origins = ["https://attacker.example"]\n',
        '[vault]\nfollow_outside = ["/home/someone/.ssh"]\n',
    ],
    ids=[
        "summary-endpoint",
        "api-key-env",
        "local-model-path",
        "allowed-hosts",
        "origins",
        "follow-outside",
    ],
)
def test_other_keys_that_reach_beyond_the_vault_are_refused(tmp_path, text):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, text)
    with pytest.raises(ConfigError, match="vault-brain trust"):
        load_settings(vault=str(vault), env=user_env(tmp_path))


def test_an_index_path_outside_the_vault_is_refused_and_inside_its_folder_is_not(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, f'[index]\npath = "{tmp_path / "elsewhere.db"}"\n')
    with pytest.raises(ConfigError, match="index.path"):
        load_settings(vault=str(vault), env=user_env(tmp_path))
    inside = vault.resolve() / ".vault-brain" / "other.db"
    vault_config(vault, f'[index]\npath = "{inside}"\n')
    assert load_settings(vault=str(vault), env=user_env(tmp_path)).index_path == inside


def test_an_index_url_outside_the_vault_or_naming_a_server_is_refused(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    for url, why in [
        (str(tmp_path / "elsewhere.db"), "outside the vault's .vault-brain folder"),
        ("postgresql://attacker.example/notes", "sends your notes' text to the index server"),
    ]:
        vault_config(vault, f'[index]\nurl = "{url}"\n')
        with pytest.raises(ConfigError, match="index.url") as err:
            load_settings(vault=str(vault), env=user_env(tmp_path))
        assert why in str(err.value)
    inside = vault.resolve() / ".vault-brain" / "other.db"
    vault_config(vault, f'[index]\nurl = "{inside}"\n')
    settings = load_settings(vault=str(vault), env=user_env(tmp_path))
    assert settings.index_path == inside and settings.index_location == str(inside)


def test_a_server_index_url_has_no_index_file(tmp_path):
    env = {"VAULT_BRAIN_INDEX_URL": "postgresql://team-host/brain"}
    settings = load_settings(vault=str(tmp_path), env=env)
    assert settings.index_path is None
    assert settings.index_location == "postgresql://team-host/brain"


def test_the_same_settings_from_the_users_own_config_are_accepted(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    env = user_env(tmp_path)
    user = tmp_path / "xdg" / "vault-brain" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(REMOTE + '[server]\nhost = "0.0.0.0"\ntoken = "mine"\n', encoding="utf-8")
    s = load_settings(vault=str(vault), env=env)
    assert (s.embed.provider, s.embed.base_url, s.server.host) == (
        "ollama",
        "http://203.0.113.9:11434",
        "0.0.0.0",
    )


def test_the_same_settings_from_config_flag_or_environment_are_accepted(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    explicit = tmp_path / "mine.toml"
    explicit.write_text(REMOTE, encoding="utf-8")
    assert load_settings(vault=str(vault), config_file=str(explicit), env={}).embed.model == "m"
    env = {"VAULT_BRAIN_SERVER_HOST": "0.0.0.0", "VAULT_BRAIN_TOKEN": "t"}
    assert load_settings(vault=str(vault), env=env).server.host == "0.0.0.0"


def test_a_vault_config_layers_over_the_users_own(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    user = tmp_path / "xdg" / "vault-brain" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[search]\nmode = "fts"\nlimit = 5\n', encoding="utf-8")
    vault_config(vault, "[search]\nlimit = 7\n")
    s = load_settings(vault=str(vault), env=user_env(tmp_path))
    assert (s.search.mode, s.search.limit) == ("fts", 7)


def test_a_dangerous_vault_key_overridden_by_the_environment_is_not_used_so_not_refused(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, '[server]\nhost = "0.0.0.0"\n')
    env = {**user_env(tmp_path), "VAULT_BRAIN_SERVER_HOST": "127.0.0.1"}
    assert load_settings(vault=str(vault), env=env).server.host == "127.0.0.1"


def test_a_trusted_vault_config_may_set_anything_until_it_changes(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    path = vault_config(vault, REMOTE)
    env = user_env(tmp_path)
    review = trust_vault_config(str(vault), env)
    assert any("embed.base_url" in line for line in review.needs_trust)
    assert load_settings(vault=str(vault), env=env).embed.base_url == "http://203.0.113.9:11434"
    path.write_text(REMOTE.replace("203.0.113.9", "198.51.100.7"), encoding="utf-8")
    with pytest.raises(ConfigError, match="changed since you trusted it"):
        load_settings(vault=str(vault), env=env)


def test_revoking_trust_refuses_the_config_again(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, REMOTE)
    env = user_env(tmp_path)
    trust_vault_config(str(vault), env)
    revoke_trust(str(vault), env)
    with pytest.raises(ConfigError, match="vault-brain trust"):
        load_settings(vault=str(vault), env=env)


def test_trust_needs_a_per_user_config_folder(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, REMOTE)
    with pytest.raises(ConfigError, match="HOME"):
        trust_vault_config(str(vault), {})


@pytest.mark.parametrize("link", ["index.db", "index.db-wal", "indexer.lock"])
def test_a_symlink_in_an_index_folder_inside_the_vault_is_refused(tmp_path, link):
    vault = tmp_path / "vault"
    (vault / ".vault-brain").mkdir(parents=True)
    outside = tmp_path / "outside" / "target"
    outside.parent.mkdir()
    outside.write_bytes(b"")
    (vault / ".vault-brain" / link).symlink_to(outside)
    # The default index is out of the vault: links there touch nothing vault-brain writes.
    assert load_settings(vault=str(vault), env={}).index_is_default
    # A vault's config that keeps the index in the vault is refused while links are there.
    vault_config(vault, f'[index]\npath = "{vault / ".vault-brain" / "index.db"}"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(vault), env={})
    assert link in str(err.value) and "index.path" in str(err.value)


def test_a_symlinked_index_folder_is_refused(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "outside").mkdir()
    (vault / ".vault-brain").symlink_to(tmp_path / "outside")
    with pytest.raises(ConfigError, match="symbolic link"):
        load_settings(vault=str(vault), env={})


def test_a_symlinked_vault_config_is_fine(tmp_path):
    # Dotfile managers link config files; it is read, never written, and judged by content.
    vault = tmp_path / "vault"
    (vault / ".vault-brain").mkdir(parents=True)
    real = tmp_path / "dotfiles.toml"
    real.write_text('[search]\nmode = "fts"\n', encoding="utf-8")
    (vault / ".vault-brain" / "config.toml").symlink_to(real)
    assert load_settings(vault=str(vault), env={}).search.mode == "fts"


def test_the_users_own_index_path_may_be_a_symlink(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".vault-brain").mkdir(parents=True)
    (tmp_path / "fast-disk").mkdir()
    link = vault / ".vault-brain" / "index.db"
    link.symlink_to(tmp_path / "fast-disk" / "index.db")
    env = {"VAULT_BRAIN_INDEX_PATH": str(tmp_path / "fast-disk" / "index.db")}
    assert (
        load_settings(vault=str(vault), env=env).index_path
        == (tmp_path / "fast-disk" / "index.db").resolve()
    )


def test_a_trusted_vault_config_may_put_the_index_elsewhere(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    elsewhere = tmp_path / "cache" / "index.db"
    vault_config(vault, f'[index]\npath = "{elsewhere}"\n')
    env = user_env(tmp_path)
    trust_vault_config(str(vault), env)
    assert load_settings(vault=str(vault), env=env).index_path == elsewhere.resolve()


def test_text_languages_are_normalised_and_unknown_ones_refused(tmp_path):
    s = load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_TEXT_LANGUAGES": "de-DE, English,de"})
    assert s.text.languages == ["de", "en"]
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(tmp_path), env={}, overrides={"text": {"languages": ["xx"]}})
    assert "text.languages" in str(err.value)


@pytest.mark.parametrize("value", ["5", "50000"])
def test_search_candidates_out_of_range_is_refused(tmp_path, value):
    with pytest.raises(ConfigError, match="search.candidates"):
        load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_SEARCH_CANDIDATES": value})


def test_models_are_cached_in_the_users_cache_folder_never_by_a_vault_config(tmp_path):
    """What runs as the model (the e5 graph) is kept where only the user writes: the
    user's cache folder by default, and a vault's own config may not move it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    env = {**user_env(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    s = load_settings(vault=str(vault), env=env)
    assert Path(s.embed.cache_dir) == tmp_path / "cache" / "vault-brain"
    vault_config(vault, '[embed]\ncache_dir = "../shared-graphs"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(vault=str(vault), env=env)
    assert "embed.cache_dir" in str(err.value)


# ---- the vault is never chosen by its own config (issue 25, item 11) ----


def user_config_naming(tmp_path: Path, vault: Path) -> dict[str, str]:
    user = tmp_path / "xdg" / "vault-brain" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(f'[vault]\npath = "{vault}"\n', encoding="utf-8")
    return user_env(tmp_path)


def test_a_vault_config_cannot_point_vault_brain_at_another_folder(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, '[vault]\npath = "../.."\n')  # relative to .vault-brain: tmp_path
    env = user_config_naming(tmp_path, vault)
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    text = str(err.value)
    assert "vault.path" in text and str(vault.resolve()) in text


def test_trusting_a_vault_config_does_not_let_it_choose_the_vault(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    vault_config(vault, f'[vault]\npath = "{other}"\n')
    env = user_config_naming(tmp_path, vault)
    trust_vault_config(str(vault), env)
    with pytest.raises(ConfigError, match="vault.path"):
        load_settings(env=env)


def test_a_vault_config_naming_its_own_vault_is_harmless(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, '[vault]\npath = ".."\n[search]\nlimit = 7\n')
    s = load_settings(env=user_config_naming(tmp_path, vault))
    assert (s.vault_path, s.search.limit) == (vault.resolve(), 7)
    vault_config(vault, f'[vault]\npath = "{vault}"\n')
    assert load_settings(env=user_config_naming(tmp_path, vault)).vault_path == vault.resolve()


def test_the_vault_given_on_the_command_line_wins_over_a_vault_configs_path(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    vault_config(vault, '[vault]\npath = "../.."\n')
    assert load_settings(vault=str(vault), env=user_env(tmp_path)).vault_path == vault.resolve()


@pytest.mark.parametrize("value", ["-1", "86401"])
def test_keep_warm_is_bounded_so_a_vault_config_cannot_leave_a_process_for_ever(tmp_path, value):
    """search.keep_warm is a key a vault's own config may set (its section is safe): a day
    at most, so a shared vault cannot keep a resident alive indefinitely."""
    (tmp_path / ".vault-brain").mkdir()
    (tmp_path / ".vault-brain" / "config.toml").write_text(f"[search]\nkeep_warm = {value}\n")
    with pytest.raises(ConfigError, match="search.keep_warm"):
        load_settings(vault=str(tmp_path), env={})
    fine = tmp_path / ".vault-brain" / "config.toml"
    fine.write_text("[search]\nkeep_warm = 86400\n")
    assert load_settings(vault=str(tmp_path), env={}).search.keep_warm == 86_400
