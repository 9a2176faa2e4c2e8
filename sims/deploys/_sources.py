"""Where the runs in flight come from: what a real host left, read without changing it.

A source is one of:

- a scope's saved dump, the JSON ``JobRunDump.to_json`` writes (read back by ``from_json``);
- a scope's SQLite file (``scopehost.read_scope_file``: its scope id is the one the file records,
  or its name's stem);
- a folder: a host's data folder (every ``scopes/*.sqlite3`` in it, as ``python -m
  examples.shop.serve --data DIR`` leaves), a host's scope folder (every ``*.sqlite3`` in it), or
  a folder of recorded history (every ``history-*.jsonl``);
- a recorded history file, ``history-*.jsonl``: every history given is read as one (its parts
  and processes merged, as ``python -m sims check`` reads them), and its rows are the oracle's
  model of the store at its end (:mod:`._history_rows`);
- a ``JobRunDump`` value (from Python).

Anything else is refused with :class:`DeployInputError`, one line that names the value and what to
give instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import attrs

from driver import ValidationFailed
from scopehost import JobRunDump, read_scope_file

from ._errors import DeployInputError
from ._history_rows import history_dumps

#: What ``--runs`` takes, said in every refusal of a source.
WHAT_TO_GIVE = (
    "give a scope's saved dump (the JSON JobRunDump.to_json writes), a scope's .sqlite3 file, a "
    "host's data folder (its scopes/*.sqlite3), or a recorded history (history-*.jsonl, or its "
    "folder)"
)

_SQLITE_HEADER = b"SQLite format 3\x00"


@attrs.frozen
class RunsSource:
    """One scope's rows, and where they were read (``label``, as the user named it)."""

    label: str
    dump: JobRunDump


def read_sources(given: Iterable[str | Path | JobRunDump]) -> tuple[RunsSource, ...]:
    """Every scope the sources hold, each once; histories given are read together, as one."""
    sources: list[RunsSource] = []
    histories: dict[str, list[Path]] = {}
    for one in given:
        if isinstance(one, JobRunDump):
            sources.append(RunsSource(f"a dump of scope {one.scope_id}", one))
            continue
        found, history = _read_path(Path(one))
        sources.extend(found)
        if history:
            histories.setdefault(str(one), []).extend(history)
    if histories:
        label = ", ".join(histories)
        files = [path for paths in histories.values() for path in paths]
        sources.extend(RunsSource(label, dump) for dump in history_dumps(files, label))
    if not sources:
        raise DeployInputError(f"no source of runs; {WHAT_TO_GIVE} (--runs SOURCE)")
    _hold_to_one_each(sources)
    return tuple(sources)


def _read_path(path: Path) -> tuple[list[RunsSource], list[Path]]:
    """A path's scopes, and its history files (read later, with every other history given)."""
    if path.is_dir():
        return _read_folder(path)
    if not path.is_file():
        raise DeployInputError(f"--runs {path}: no such file or folder; {WHAT_TO_GIVE}")
    try:
        with path.open("rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError as error:
        raise DeployInputError(f"--runs {path}: cannot be read ({error}); {WHAT_TO_GIVE}") from None
    if head == _SQLITE_HEADER:
        return [_scope_file(path)], []
    text = _text(path)
    if _is_history(text):
        return [], [path]
    return [RunsSource(str(path), _saved_dump(path, text))], []


def _read_folder(folder: Path) -> tuple[list[RunsSource], list[Path]]:
    files = sorted((folder / "scopes").glob("*.sqlite3")) or sorted(folder.glob("*.sqlite3"))
    if files:
        return [_scope_file(file) for file in files], []
    histories = sorted(folder.glob("history-*.jsonl"))
    if histories:
        return [], histories
    raise DeployInputError(
        f"--runs {folder}: the folder holds no scope's file (scopes/*.sqlite3 or *.sqlite3) and "
        f"no history-*.jsonl; {WHAT_TO_GIVE}"
    )


def _scope_file(path: Path) -> RunsSource:
    try:
        return RunsSource(str(path), read_scope_file(path))
    except ValueError as error:  # it names the file, and what to give
        raise DeployInputError(f"--runs: {error}") from None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DeployInputError(
            f"--runs {path}: not a dump, a scope's file or a history (it is not UTF-8 text: "
            f"{error}); {WHAT_TO_GIVE}"
        ) from None


def _is_history(text: str) -> bool:
    """Whether ``text`` reads as a recorded history: its first line an event (``ev``)."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        event = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(event, dict) and "ev" in event


def _saved_dump(path: Path, text: str) -> JobRunDump:
    try:
        return JobRunDump.from_json(text)
    except ValidationFailed as error:
        raise DeployInputError(
            f"--runs {path} is not a scope's saved dump ({error}); {WHAT_TO_GIVE}"
        ) from None


def _hold_to_one_each(sources: list[RunsSource]) -> None:
    """One scope, one source: two would be two restores of one scope, the second replacing the
    first's runs."""
    seen: dict[str, str] = {}
    for source in sources:
        scope = source.dump.scope_id
        if scope in seen:
            raise DeployInputError(
                f"--runs {seen[scope]} and --runs {source.label} both hold scope {scope}; give "
                "each scope once (the one that holds its latest rows)"
            )
        seen[scope] = source.label
