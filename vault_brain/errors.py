"""One error hierarchy, mapped once at the edges (CLI exit codes, MCP error payloads)."""

from __future__ import annotations

import errno


class VaultBrainError(Exception):
    """Base of every error vault-brain raises on purpose."""

    code = "INTERNAL"
    retryable = False

    def __init__(self, message: str, *, retryable: bool | None = None, **details: object) -> None:
        """`retryable` overrides the class's default for this one error (a CONFLICT that a
        retry with the current version settles)."""
        super().__init__(message)
        self.message = message
        self.details = details
        if retryable is not None:
            self.retryable = retryable

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        out.update(self.details)
        return out


class InvalidInput(VaultBrainError):
    code = "INVALID_INPUT"


class NotFound(VaultBrainError):
    code = "NOT_FOUND"


class Conflict(VaultBrainError):
    """The file changed since the caller read it; details carry `current_version`."""

    code = "CONFLICT"


class Forbidden(VaultBrainError):
    code = "FORBIDDEN"


class Unavailable(VaultBrainError):
    code = "UNAVAILABLE"
    retryable = True


class ConfigError(InvalidInput):
    """Every invalid setting at once, so the user fixes them in one go."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


class IndexDamaged(Unavailable):
    """The index is damaged; it is rebuilt from the files (nothing is lost)."""


class InvalidExport(InvalidInput):
    """A chat export that cannot be read or is not the format named: the message names the
    file and the place in it. The CLI exits with 2, and nothing has been written."""


# OSError numbers that mean the disk (or the user's quota on it) is full.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(where: str, *, written: str = "nothing was written") -> Unavailable:
    """A full disk, said as such: retryable once space is freed (never INTERNAL)."""
    return Unavailable(
        f"the disk holding {where} is full: {written}; free some space and retry",
        reason="disk_full",
    )
