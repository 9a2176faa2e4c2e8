"""The file layer's rules, judged from what a world on files did to a scope's file and what the
scope answered next (the ``file.*`` events; docs/protocol.md, "The scope's file").

- After anything SQLite does to the file from outside (a reader, a writer of a table of its own, a
  checkpoint from a shell) or a change of its metadata alone (``chmod``, ``touch``), the scope
  serves (``file-outside``); the checkpoint that follows compares every row.
- Another scope's file at the scope's path is refused with ``ScopeFileForeign``, never served
  (``file-identity``); a file copied over the open scope's in place, behind SQLite, is refused
  with ``ScopeFileChanged`` (``file-behind``). A refusal of the world's own call when nothing was
  written behind the scope (``file.refused``) is a ``file-outside`` finding too.
- After a power loss the scope holds every write whose reply left it: the checkpoint right after
  it is judged as ``durable-writes`` rather than ``store-rows``/``store-steps``, so a lost
  acknowledged write is named for what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

Report = Callable[[str, str | None, float, str], None]
Probe = Callable[[str], None]

#: How the story names each outside act.
_ACTS: Final = {
    "read": "an outside SQLite reader",
    "write": "an outside SQLite writer of a table of its own",
    "checkpoint": "a checkpoint from an outside SQLite connection",
    "chmod": "a chmod of its file",
    "touch": "a touch of its file",
}


class FileRules:
    """The file layer's rules, for one world."""

    def __init__(self, report: Report, probe: Probe) -> None:
        self._report = report
        self._probe = probe
        #: Scopes that lost power and have not been checkpointed since.
        self._powered_off: set[str] = set()

    def on_outside(self, e: dict[str, Any]) -> None:
        self._probe("file.outside")
        if e["refused"] is not None:
            self._report(
                "file-outside",
                None,
                e["t"],
                f"scope {e['scope']!r} refused a read ({e['refused']}) after "
                f"{_ACTS.get(e['act'], e['act'])}: whatever SQLite does to the file, and a change "
                "of its metadata alone, must leave the scope serving",
            )

    def on_copied(self, e: dict[str, Any]) -> None:
        self._probe("file.foreign")
        if e["refused"] != "ScopeFileForeign":
            did = "served it" if e["refused"] is None else f"answered {e['refused']}"
            self._report(
                "file-identity",
                None,
                e["t"],
                f"scope {e['scope']!r} {did}, with a copy of scope {e['from']!r}'s file at its "
                "path: a file that records another scope must be refused with ScopeFileForeign, "
                "never served",
            )

    def on_written(self, e: dict[str, Any]) -> None:
        if e.get("alike"):
            return  # the size and header of the file it overwrote: the watch's documented limit
        self._probe("file.written-behind")
        if e["refused"] != "ScopeFileChanged":
            did = "served it" if e["refused"] is None else f"answered {e['refused']}"
            self._report(
                "file-behind",
                None,
                e["t"],
                f"scope {e['scope']!r} {did}, after scope {e['from']!r}'s file was copied over "
                "its open file in place, behind SQLite: it must refuse it with ScopeFileChanged "
                "before serving again, and keep its own log aside",
            )

    def on_refused(self, e: dict[str, Any]) -> None:
        self._report(
            "file-outside",
            None,
            e["t"],
            f"scope {e['scope']!r} refused a call of the world's own ({e['refused']}), though "
            "nothing had written its file behind SQLite: whatever SQLite does to the file, and "
            "a change of its metadata alone, must leave the scope serving",
        )

    def on_power(self, e: dict[str, Any]) -> None:
        self._probe("file.power")
        self._powered_off.update(e["scopes"])

    def checkpoint_rule(self, scope: str, rule: str) -> tuple[str, str]:
        """The rule a checkpoint's difference breaks, and the words that open its finding:
        right after a power loss, a difference is an acknowledged write the loss took."""
        if scope in self._powered_off:
            return "durable-writes", "after a power loss, "
        return rule, ""

    def checkpointed(self, scope: str) -> None:
        self._powered_off.discard(scope)
