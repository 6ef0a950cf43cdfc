"""Credentials are caught before they are saved; prose and placeholders are not."""

from __future__ import annotations

import pytest

from tests.complexity import assert_linear
from vault_brain.text.secrets import find_secret

# Built from parts so that this file does not itself trip secret scanners.
GITHUB = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("aws_access_key_id AKIA" + "Z3MHALDQ2B7XK4PN in the config", "AWS access key"),
        (f"clone with {GITHUB}", "GitHub token"),
        ("token github_pat_" + "11ABCDEFG0" * 6, "GitHub token"),
        ("key: sk-proj-" + "abcDEF123ghiJKL456mnoPQR789", "OpenAI API key"),
        ("sk-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0", "OpenAI API key"),
        ("sk-ant-api03-" + "abcDEF123ghiJKL456mnoPQR789", "Anthropic API key"),
        ("slack: xoxb-" + "1234567890-abcdefghij", "Slack token"),
        ("maps AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "Google API key"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n", "private key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
        ("-----BEGIN PRIVATE KEY-----", "private key"),
        (f"cookie={JWT}", "JWT"),
        ("Authorization: Bearer abcd1234efgh5678ijkl9012", "bearer token"),
    ],
)
def test_known_credential_formats_are_found(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        'password = "hunter2xyz"',
        "API_KEY: abc123def456ghi",
        "db_password=Tr0ub4dor&3x",
        "**Password:** s3cr3tValue9",
        "export SECRET_KEY='q8f7g6h5j4'",
        "client_secret: 9f8e7d6c5b4a3f2e",
        "https://api.example.org/v1?access_token=4f9a8b7c6d5e",
    ],
)
def test_password_and_key_assignments_are_found(text: str) -> None:
    assert find_secret(text) == "password assignment"


@pytest.mark.parametrize(
    "text",
    [
        "The password policy says passwords need 12 characters.",
        "Reset your password from the settings page.",
        "Password: see the team vault",
        "The secret: happiness is simple.",
        "token budget: 4000 tokens per answer",
        "max_tokens = 4096",
        "Use a bearer token in the Authorization header.",
        "We discussed API keys and how to rotate them.",
        "use scikit-learn for task-management-system-design",
        "ask-me-anything-about-the-release-process",
        "",
    ],
)
def test_ordinary_prose_is_not_a_secret(text: str) -> None:
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "password: <your-password>",
        "API_KEY=<your-api-key>",
        "API_KEY=xxx",
        "api_key = 'xxxxxxxxxxxx'",
        "token: ***",
        'password = "********"',
        "TOKEN=${TOKEN}",
        "token = $GITHUB_TOKEN",
        "api_key: {{ api_key }}",
        "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx",
        "AWS key AKIAIOSFODNN7EXAMPLE from the docs",
        "Authorization: Bearer <token>",
        "api_key = os.environ['OPENAI_API_KEY']",
        'password = getenv("DB_PASSWORD")',
        "password: your_password_here",
        'secret = "changeme"',
    ],
)
def test_placeholders_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None


def test_the_secret_itself_is_never_returned() -> None:
    found = find_secret(f"my token is {GITHUB}")
    assert found is not None and GITHUB not in found


def test_secret_deep_inside_a_long_note_is_found() -> None:
    text = "Meeting notes.\n" * 2000 + f"\nremote: {GITHUB}\n" + "More notes.\n" * 2000
    assert find_secret(text) == "GitHub token"


@pytest.mark.parametrize("unit", ["ab_", "password_", "password ", "eyJ", "sk-", "Bearer "])
def test_adversarial_text_is_checked_in_linear_time(unit: str) -> None:
    assert_linear("find_secret", find_secret, unit * (200_000 // len(unit)))


def test_tool_settings_that_mention_tokens_are_not_secrets() -> None:
    assert find_secret("tokenizer: cl100k_base\nmax_tokens: 4096") is None


# --- formats the filter used to miss (issue 11, item 25) ----------------------------------

STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITLAB = "glpat-" + "x9Yz8W7v6U5t4S3r2Q1p"
SENDGRID = "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("DATABASE_URL=postgres://admin:S3cretPass9@db.internal:5432/app", "password in a URL"),
        ("mysql://app:hunter2pass@localhost/shop", "password in a URL"),
        ("mongodb+srv://ops:p4ssw0rdXyZ@cluster0.ab1cd.mongodb.net/test", "password in a URL"),
        ("cache at redis://:Zq8wLmN4vR@cache:6379/0", "password in a URL"),
        (f"stripe {STRIPE}", "Stripe API key"),
        ("rk_live_" + "51H8xYzAbCdEfGhIjKlMnOp", "Stripe API key"),
        (f"HF_TOKEN={HF}", "Hugging Face token"),
        (f"//registry.npmjs.org/:_authToken={NPM}", "npm token"),
        (f"gitlab {GITLAB}", "GitLab token"),
        (f"SENDGRID_API_KEY={SENDGRID}", "SendGrid API key"),
        ("-----begin rsa private key-----\nMIIE\n", "private key"),
        ("----BEGIN PRIVATE KEY----\nMIIE\n", "private key"),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "private key"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "private key"),
        ("ghp_" + "aB3dE5fG7hJ9\u200bkL1mN3pQ5rS7tU9vW1xY3z5A", "GitHub token"),
        ("key ｓｋ－" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0", "OpenAI API key"),
        ("ｇｈｐ＿" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A", "GitHub token"),
        ("AKIA\u200c" + "Z3MHALDQ2B7XK4PN", "AWS access key"),
    ],
)
def test_more_credential_formats_are_found(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize(
    "text",
    [
        "pwd: /home/alice/projects2/notes",
        "pwd = ~/work/2024/taxes",
        "cwd: /var/lib/app3/data",
        "postgres://app@db.internal:5432/app",
        "postgres://app:${DB_PASSWORD}@db.internal/app",
        "postgres://user:<password>@localhost/db",
        "postgres://user:password@localhost/db",
        "https://example.com:8080/path?q=1",
        "see https://en.wikipedia.org/wiki/User:Example@home",
        "sk_live_" + "x" * 24,
        "stripe keys start with sk_live_ and rk_live_",
        "hf_hub_download(repo_id='org/model', filename='config.json')",
        "npm_config_cache is a folder",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n",
        "-----BEGIN CERTIFICATE-----\nMIID\n",
        "SG.reference to section 4.2",
        "a zero\u200bwidth space in prose",
        "ｆｕｌｌｗｉｄｔｈ text is just text",
    ],
)
def test_paths_urls_and_lookalikes_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None
