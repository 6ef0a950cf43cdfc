"""Spotting credentials in text a model wants to save, before it lands in the vault.

A note is synced, indexed and shown to every model that searches it; a pasted API key
would spread with it. Detection favours few false alarms on prose ("reset your password")
and on placeholders ("<your-api-key>", "${TOKEN}"), since a refused save costs the user
a retry. Only the kind of credential is ever reported, never the secret itself.
"""

from __future__ import annotations

import re
import unicodedata

# Known token formats: precise enough that any match is worth refusing.
_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Any case, four or five dashes: what people paste is not always what openssl wrote.
    (
        "private key",
        re.compile(r"(?i)-{4,5} ?BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"),
    ),
    ("AWS access key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    (
        "GitHub token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})"
        ),
    ),
    ("Anthropic API key", re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,300}")),
    (
        "OpenAI API key",
        re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,300}"),
    ),
    ("Slack token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,300}")),
    (
        "Stripe API key",
        re.compile(r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{16,250}(?![A-Za-z0-9])"),
    ),
    ("Hugging Face token", re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,60}(?![A-Za-z0-9_])")),
    ("npm token", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])")),
    ("GitLab token", re.compile(r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,64}")),
    (
        "SendGrid API key",
        re.compile(r"(?<![A-Za-z0-9_-])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    ),
    ("Google API key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    (
        "JWT",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{8,2000}"
        ),
    ),
)

# scheme://user:password@host (databases, brokers, basic auth); the password is checked.
_URL_PASSWORD = re.compile(
    r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{1,30}://[^\s:/@?#]{0,100}:(?P<pw>[^\s:/@?#]{1,200})@"
    r"(?=[a-z0-9\[])"
)
# A value that is a file system path (`pwd: /home/sam/projects`), not a password.
_PATH = re.compile(r"^(?:~|\.{1,2})?[/\\][^\s/\\]*(?:[/\\][^\s/\\]*)+$|^[A-Za-z]:[/\\]")
# Characters that hide a token from a pattern without showing in the text.
_INVISIBLE = frozenset(ch for ch in map(chr, range(0x2070)) if unicodedata.category(ch) == "Cf") | {
    "\u2060", "\u2061", "\u2062", "\u2063", "\u2064", "\ufeff"
}  # fmt: skip

_BEARER = re.compile(r"(?i)\bbearer[ \t]{1,8}([A-Za-z0-9._~+/-]{20,2000}=*)")

# `password = "hunter2xyz"`, `API_KEY: abc123...`, `**Password:** s3cr3t-value`.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![a-z0-9])
    (?:password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?key|
       auth[_-]?token|access[_-]?token|refresh[_-]?token|token|private[_-]?key|
       client[_-]?secret|credentials?)
    (?:[_-][a-z0-9]{1,20}){0,3}
    [*_`"']{0,4}[ \t]{0,8}(?::=|=>|=|:)[ \t]{0,8}[*_`]{0,4}[ \t]{0,8}
    (?:
        (?P<q>["'])(?P<quoted>[^"'\s]{6,200})(?P=q)
      | (?P<bare>[^\s"'`,;()\[\]{}<>]{8,200})(?=[\s,;]|$)
    )
    """
)

_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        <.*> | \$\{.*\} | \$[a-z_][a-z0-9_]* | \{\{.*\}\} | %[a-z_]+% |
        x{3,} | \*{3,} | \.{3,} | -+ | _+ |
        your[-_ ].* | .*example.* | .*placeholder.* | .*redacted.* | .*dummy.* |
        password | passwd | pass | secret | pwd | user | username |
        changeme | change[-_]me | replace[-_]?me | todo | tbd | none | null | true | false |
        env\..* | os\.environ.* | process\.env.* | settings\..* | config\..*
    )$"""
)


def find_secret(text: str) -> str | None:
    """The kind of credential `text` holds ("GitHub token", "password assignment"...), or None.

    Zero-width characters are dropped and compatibility forms folded (NFKC: fullwidth
    `ｓｋ-` is `sk-`) first, so a token split or disguised that way is still found.
    """
    text = _normalise(text)
    for kind, pattern in _FORMATS:
        for match in pattern.finditer(text):
            token = match.group()
            if kind == "private key" or (_token_like(token) and not _is_placeholder(token)):
                return kind
    for match in _URL_PASSWORD.finditer(text):
        password = match.group("pw")
        if _looks_random(password) and not _is_placeholder(password):
            return "password in a URL"
    for match in _BEARER.finditer(text):
        token = match.group(1)
        if _looks_random(token) and not _is_placeholder(token):
            return "bearer token"
    for match in _ASSIGNMENT.finditer(text):
        if match.group("quoted") is not None:
            value = match.group("quoted")
            if not _is_placeholder(value) and len(set(value)) > 2 and not _PATH.match(value):
                return "password assignment"
        else:
            value = match.group("bare")
            if _looks_random(value) and not _is_placeholder(value) and not _PATH.match(value):
                return "password assignment"
    return None


def _normalise(text: str) -> str:
    if text.isascii():
        return text
    text = "".join(ch for ch in text if ch not in _INVISIBLE)
    return unicodedata.normalize("NFKC", text)


def _token_like(token: str) -> bool:
    """Two of lower case, upper case and digits, and varied: a generated token (Hugging Face
    tokens have no digits), not a word after a prefix."""
    classes = (
        any(ch.islower() for ch in token)
        + any(ch.isupper() for ch in token)
        + any(ch.isdigit() for ch in token)
    )
    return classes >= 2 and len(set(token)) > 4


def _looks_random(value: str) -> bool:
    """Letters and digits mixed: how generated secrets look and ordinary words do not."""
    return (
        any(ch.isdigit() for ch in value)
        and any(ch.isalpha() for ch in value)
        and len(set(value)) > 4
    )


def _is_placeholder(value: str) -> bool:
    return (
        bool(_PLACEHOLDER.match(value))
        or "EXAMPLE" in value.upper()
        or re.search(r"(.)\1{7,}", value) is not None  # sk-xxxxxxxxxxxxxxxx, AKIA0000...
    )
