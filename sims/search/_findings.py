"""Remembered findings: the failing plan explore found for a world, kept to be tried first.

A search's answer depends on its budget: a bug found at 3,000 worlds may not be found at 300, and
a smaller budget next time would lose it. So, as Hypothesis keeps failing examples in its example
database, explore keeps the smallest failing plan it found for each world (a scenario, a seed, a
mutant or none) in a folder of the project it ran in, ``.sims/findings/`` by default (the
``SIMS_FINDINGS`` environment variable names another), one small text file per world:

    scenario: late-claim
    seed: 1
    mutant: patch-own
    plan: FaultPlan(faults=(...))

and, for a scenario whose inputs vary (``@scenario(inputs=...)``), the inputs the world failed on,
as JSON text, in one more line (``inputs: {"orders": 2}``); a file without that line, as every
file was before inputs varied, reads as it did: the scenario's simplest inputs.

The plan is read back with :func:`~sims.faults._plan.plan_from_text`, which executes nothing: a
file is data, never code. A file that does not read as one (edited by hand, cut short) is left
alone and ignored; the next finding for its world replaces it. A folder that cannot hold them (a
file of that name, a read-only disk) loses nothing but the remembering: the search's report still
shows its finding, and says why it was not kept (:func:`not_remembered`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import attrs

from ..faults._plan import FaultPlan, plan_from_text

#: The environment variable that names the folder instead of ``.sims/findings`` here.
FOLDER_VARIABLE = "SIMS_FINDINGS"
DEFAULT_FOLDER = Path(".sims") / "findings"
_SUFFIX = ".plan"
_FIELDS = ("scenario", "seed", "mutant", "plan")
#: What a finding of a scenario with inputs adds, last.
_INPUTS = "inputs"


def findings_folder() -> Path:
    """Where findings are kept: ``$SIMS_FINDINGS``, else ``.sims/findings`` in this folder."""
    return Path(os.environ.get(FOLDER_VARIABLE) or DEFAULT_FOLDER)


@attrs.frozen
class Finding:
    """One remembered failing plan, and the world it failed in."""

    scenario: str
    seed: int
    mutant: str | None
    plan: FaultPlan
    path: Path
    #: The scenario's inputs the world failed on, as JSON text; None: its simplest (or none).
    inputs: str | None = None

    def line(self) -> str:
        mutant = f" with mutant {self.mutant}" if self.mutant else ""
        inputs = f" on the inputs {self.inputs}" if self.inputs is not None else ""
        return f"{self.scenario}{mutant}, seed {self.seed}: {self.plan!r}{inputs}"


def _file_name(scenario: str, seed: int, mutant: str | None) -> str:
    """A readable name, and a digest of the whole key (two scenarios may read alike once cut)."""
    words = "-".join([scenario, f"seed{seed}", *([mutant] if mutant else [])])
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", words)[-60:].lstrip("._-")
    digest = hashlib.blake2b(repr((scenario, seed, mutant)).encode(), digest_size=5).hexdigest()
    return f"{readable}-{digest}{_SUFFIX}"


def remember(
    folder: Path,
    scenario: str,
    seed: int,
    mutant: str | None,
    plan: FaultPlan,
    *,
    inputs: str | None = None,
) -> Path | None:
    """Keep ``plan`` (on ``inputs``, JSON text, for a scenario whose inputs vary) as the world's
    finding (replacing one kept before); its file's path. Written whole or not at all: a reader
    never sees half a file. None for a world whose name holds a line break (a file of one field
    a line could not hold it)."""
    if any(char in f"{scenario}{mutant}" for char in "\r\n"):
        return None
    text = "".join(
        f"{name}: {value}\n"
        for name, value in zip(_FIELDS, (scenario, seed, mutant or "-", repr(plan)), strict=True)
    )
    if inputs is not None:
        # JSON text holds no line break (json.dumps escapes them): one line, as every field.
        text += f"{_INPUTS}: {json.dumps(json.loads(inputs))}\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _file_name(scenario, seed, mutant)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def not_remembered(folder: Path, error: OSError) -> str:
    """Why ``folder`` could not keep a finding, in one line with the remedies."""
    blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        why = f"{blocking} is a file, not a folder"
    else:
        why = error.strerror or str(error)
    return (
        f"not remembered: {folder} cannot hold findings ({why}); make it a folder you can write "
        f"to, name another with {FOLDER_VARIABLE}=FOLDER, or explore with --no-remember"
    )


def recall(folder: Path, scenario: str, seed: int, mutant: str | None) -> Finding | None:
    """The world's remembered finding, or None (none kept, or a file that does not read)."""
    found = _read(folder / _file_name(scenario, seed, mutant))
    if found is None or (found.scenario, found.seed, found.mutant) != (scenario, seed, mutant):
        return None
    return found


def forget(finding: Finding) -> None:
    finding.path.unlink(missing_ok=True)


def findings(folder: Path, scenario: str | None = None) -> tuple[list[Finding], list[Path]]:
    """The findings kept in ``folder`` (of ``scenario`` only, if given), by file name, and the
    files there that do not read as one."""
    kept: list[Finding] = []
    unreadable: list[Path] = []
    for path in sorted(folder.glob(f"*{_SUFFIX}")) if folder.is_dir() else []:
        found = _read(path)
        if found is None:
            unreadable.append(path)
        elif scenario is None or found.scenario == scenario:
            kept.append(found)
    return kept, unreadable


def _read(path: Path) -> Finding | None:
    try:
        lines = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(line.partition(": ")[::2] for line in lines)
    inputs = fields.pop(_INPUTS, None)
    if sorted(fields) != sorted(_FIELDS) or len(lines) != len(_FIELDS) + (inputs is not None):
        return None
    if inputs is not None and not _json(inputs):
        return None
    try:
        plan = plan_from_text(fields["plan"])
    except ValueError:
        return None
    seed = fields["seed"]
    if not seed.isdigit():
        return None
    mutant = None if fields["mutant"] == "-" else fields["mutant"]
    return Finding(fields["scenario"], int(seed), mutant, plan, path, inputs)


def _json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
