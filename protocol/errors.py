"""One user-error type: ``Error: <what> (<where>). <how to fix>``."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input that the user can fix.

    Bugs are not UserErrors: they keep their tracebacks.
    """

    def __init__(self, what: str, where: str = "", fix: str = "") -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.what
        if self.where:
            text += f" ({self.where})"
        text += "."
        if self.fix:
            text += " " + self.fix
        return text

    def __str__(self) -> str:
        return self.message
