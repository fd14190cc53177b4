"""Text that clients send: printable Unicode, with tab, line feed and carriage return the only controls.

Every input model's text fields use `PlainText` (alone, in lists, or with `Field` bounds), so that
NUL and the other C0 control characters are refused at the edge with the project's 422, the same on
every database. PostgreSQL cannot store NUL in text at all, and the other controls have no place in
an answer, a name or a question: they only ever arrive by mistake or to mangle logs and pages.
Lone surrogates (a `\\ud800` JSON escape that pairs with nothing) are refused too: they are not
characters, and no database driver can encode them.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

# C0 controls except \t (0x09), \n (0x0a) and \r (0x0d), and the surrogate range: one search per value.
_REFUSED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")


def plain_text(value: str) -> str:
    """The value unchanged, or a ValueError naming the first control character or lone surrogate."""
    found = _REFUSED.search(value)
    if found is None:
        return value
    code = ord(found.group())
    what = "a lone surrogate" if code >= 0xD800 else "control characters"
    raise ValueError(f"must not contain {what} (found U+{code:04X})")


PlainText = Annotated[str, AfterValidator(plain_text)]
"""A `str` field that refuses control characters other than tab, line feed and carriage return."""
