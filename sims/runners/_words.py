"""Text put into printed advice (a command to paste, a call to type) as data, never as code.

A scenario's path, a plan or a store's name may come from a trace, and a trace is data: a bug
report's attachment, a CI artifact, a file anyone can edit. Advice composes such text only in
forms that read back as the same text: a word quoted for a POSIX shell, a Python string literal,
or a name checked to be a plain Python name. Text that no such form shows on one line (a newline,
a terminal's escape, a direction override) is refused, so a line pasted is the whole command and
reads as it runs.
"""

from __future__ import annotations

import builtins
import keyword
import re
import shlex
from collections.abc import Iterable
from typing import Final

#: A plain Python name: an ASCII identifier.
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def one_line(text: str) -> bool:
    """Whether ``text`` prints as itself on one line (no newline, control character, direction
    override or other character that does not print)."""
    return text.isprintable()


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell command; a plan (full of single quotes) reads best in
    double quotes. A ``ValueError`` for text no one-line command can show as itself."""
    if not one_line(text):
        raise ValueError(
            f"{text!r} holds a character that does not print (a newline, a control character), "
            "which no one-line command can show as itself"
        )
    if shlex.quote(text) == text:
        return text
    if not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)


def shell_line(words: Iterable[str]) -> str:
    """A command line of ``words``, each quoted with :func:`shell_word`."""
    return " ".join(shell_word(word) for word in words)


def python_name(text: str) -> bool:
    """Whether ``text`` is a plain Python name (``MyStore``) that advice may write as code: an
    ASCII identifier, not a keyword, a dunder or one of Python's builtins (which text from a
    trace could otherwise point at ``eval`` or ``open``)."""
    return (
        _NAME.fullmatch(text) is not None
        and not keyword.iskeyword(text)
        and not (text.startswith("__") and text.endswith("__"))
        and not hasattr(builtins, text)
    )
