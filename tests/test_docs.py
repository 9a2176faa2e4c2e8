"""The repository stands alone: every relative link in its markdown resolves, and nothing in it
sends a reader to material outside it.

A link is checked the way a markdown viewer follows it: the path, relative to the file that holds
it, must name a file or folder inside the repository, and a ``#fragment`` into a markdown file must
name one of its headings (slugged as the common viewers slug them) or an explicit anchor. Links
inside code spans and fenced blocks are text, not links, and are not followed.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import trio
import trio.testing

import driver
import scopehost
import sims
from scopehost import StoreClock

ROOT = Path(__file__).resolve().parents[1]

#: Spelled in pieces so that this file does not itself point where it forbids pointing.
FORBIDDEN = (
    "../" + "shared",
    "job-run" + ".d.ts",
    "/" + "work/",
    "design" + ".md",
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def repository_files(root: Path) -> list[Path]:
    """Every file a clone holds (tracked, or new and not ignored), relative to ``root``."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        listed = ""
    if listed:
        return sorted(Path(name) for name in listed.split("\0") if name and (root / name).is_file())
    # Not a git checkout (an unpacked archive): everything but the tool caches and the venv.
    skip = {"__pycache__", "build", "out"}
    return sorted(
        path.relative_to(root)
        for path in root.rglob("*")
        if path.is_file()
        and not any(
            part.startswith(".") or part in skip or part.endswith(".egg-info")
            for part in path.relative_to(root).parts[:-1]
        )
    )


def unfenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every line outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def links(text: str) -> Iterator[tuple[int, str]]:
    """Every link target in markdown ``text``: inline links, images and reference definitions."""
    for number, line in unfenced_lines(text):
        line = _CODE_SPAN.sub("", line)
        for match in _INLINE_LINK.finditer(line):
            yield number, match.group(1)
        definition = _REFERENCE_DEF.match(line)
        if definition:
            yield number, definition.group(1)


def slug(heading: str) -> str:
    """A heading's anchor as the common markdown viewers make it: the text without its inline
    markup, lowercased, punctuation dropped, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The fragments a link into this markdown may name: heading slugs (a repeated heading gets
    ``-1``, ``-2``, ...) and explicit ``<a id>``/``<a name>`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in unfenced_lines(text):
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(_HTML_ANCHOR.findall(line))
    return found


def broken_links(root: Path, document: Path) -> list[str]:
    """Why each relative link in ``document`` (relative to ``root``) does not resolve."""
    problems = []
    text = (root / document).read_text(encoding="utf-8")
    for number, target in links(text):
        if not target or _SCHEME.match(target) or target.startswith("//"):
            continue
        path_part, _, fragment = target.partition("#")
        path_part = unquote(path_part.partition("?")[0])
        where = f"{document}:{number}: link {target!r}"
        if path_part.startswith("/"):
            problems.append(f"{where} is absolute; make it relative to {document.parent}/")
            continue
        here = root / document
        resolved = (here.parent / path_part).resolve() if path_part else here.resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where} names no file in the repository")
        elif fragment and resolved.suffix == ".md" and resolved.is_file():
            names = anchors(resolved.read_text(encoding="utf-8"))
            if unquote(fragment).lower() not in names:
                problems.append(f"{where}: {resolved.name} has no heading or anchor {fragment!r}")
    return problems


def outside_pointers(root: Path, files: list[Path]) -> list[str]:
    """Each line of a text file in the repository that points at material outside it."""
    problems = []
    for name in files:
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # not text
        for number, line in enumerate(text.splitlines(), start=1):
            for needle in FORBIDDEN:
                if needle in line:
                    problems.append(f"{name}:{number}: {needle!r} is outside the repository")
    return problems


_DOC_MENTION = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)\b")


def missing_docs(root: Path, files: list[Path]) -> list[str]:
    """Each mention of ``docs/NAME.md`` in a text file (code, help text, docs) whose file does not
    exist: a reader sent to it would find nothing."""
    problems = []
    for name in files:
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for mention in _DOC_MENTION.findall(line):
                if not (root / "docs" / mention).is_file():
                    problems.append(f"{name}:{number}: docs/{mention} does not exist")
    return problems


def markdown_files(files: list[Path]) -> list[Path]:
    return [name for name in files if name.suffix == ".md"]


# -- the repository --------------------------------------------------------------------------------


def test_the_readme_and_the_docs_index_are_among_the_documents_checked() -> None:
    documents = markdown_files(repository_files(ROOT))
    assert Path("README.md") in documents
    assert Path("docs/README.md") in documents
    assert Path("docs/protocol.md") in documents


def test_every_relative_link_in_the_markdown_resolves() -> None:
    problems = [
        problem
        for document in markdown_files(repository_files(ROOT))
        for problem in broken_links(ROOT, document)
    ]
    assert problems == []


def test_no_file_points_readers_outside_the_repository() -> None:
    assert outside_pointers(ROOT, repository_files(ROOT)) == []


def test_every_doc_the_code_names_exists() -> None:
    this_file = Path(__file__).resolve().relative_to(ROOT)  # its own examples name missing docs
    files = [name for name in repository_files(ROOT) if name != this_file]
    assert missing_docs(ROOT, files) == []


def test_the_docs_index_links_every_document_in_docs() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for _, target in links(index)}
    present = {path.name for path in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert sorted(present - linked) == []


_TABLE_ROW = re.compile(r"^\|\s*`(\w+)`\s*\|([^|]*)\|")
_NUMBER = re.compile(r"\d+(?: \d{3})*(?:\.\d+)?")
_QUOTED = re.compile(r'`"(.*?)"`')


def documented_values(text: str) -> dict[str, object]:
    """``NAME -> value`` from the rows of docs/protocol.md's table of values: numbers as written
    (``900 000`` is 900000), strings in code spans, several strings as a tuple."""
    section = text.partition("## Values the protocol leaves open")[2].partition("\n## ")[0]
    values: dict[str, object] = {}
    for line in section.splitlines():
        row = _TABLE_ROW.match(line)
        if not row:
            continue
        name, cell = row.groups()
        quoted = _QUOTED.findall(cell)
        if quoted:
            values[name] = quoted[0] if len(quoted) == 1 else tuple(quoted)
            continue
        number = _NUMBER.search(cell)
        if number:
            literal = number.group().replace(" ", "")
            values[name] = float(literal) if "." in literal else int(literal)
    return values


def driver_constants() -> dict[str, object]:
    """Every value constant ``driver`` exports under a ``JOB_`` name, and the door's reason."""
    return {
        name: getattr(driver, name)
        for name in driver.__all__
        if (name.startswith("JOB_") or name == "SYSTEM_DOOR_WAIT")
        and not callable(getattr(driver, name))
    }


def test_the_protocol_tables_every_constant_of_the_driver_with_its_value() -> None:
    documented = documented_values((ROOT / "docs" / "protocol.md").read_text(encoding="utf-8"))
    constants = driver_constants()
    missing = sorted(set(constants) - set(documented))
    assert missing == [], (
        "docs/protocol.md, 'Values the protocol leaves open', has no row for these; "
        "add one per constant with its value and what it is for"
    )
    wrong = {name: (documented[name], value) for name, value in constants.items()}
    assert {name: pair for name, pair in wrong.items() if pair[0] != pair[1]} == {}


# -- the checks themselves can fail ----------------------------------------------------------------


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return Path(name)


def test_a_missing_file_a_missing_heading_and_an_escape_are_each_reported(tmp_path: Path) -> None:
    _write(tmp_path, "docs/there.md", "# The lease\n\n## `BEGIN`: the commitment point\n")
    doc = _write(
        tmp_path,
        "docs/index.md",
        "[ok](there.md) [ok](there.md#begin-the-commitment-point) [ok](#an-anchor)\n"
        '<a id="an-anchor"></a>\n'
        "[gone](missing.md) and [wrong](there.md#the-claim)\n"
        "[out](../../elsewhere.md) [abs](/etc/passwd) [web](https://example.com/x.md)\n"
        "`[code](not-a-link.md)`\n"
        "```\n[fenced](not-a-link-either.md)\n```\n"
        "[ref]: also-missing.md\n",
    )
    assert broken_links(tmp_path, doc) == [
        "docs/index.md:3: link 'missing.md' names no file in the repository",
        "docs/index.md:3: link 'there.md#the-claim': there.md has no heading or anchor 'the-claim'",
        "docs/index.md:4: link '../../elsewhere.md' leaves the repository",
        "docs/index.md:4: link '/etc/passwd' is absolute; make it relative to docs/",
        "docs/index.md:9: link 'also-missing.md' names no file in the repository",
    ]


def test_repeated_headings_get_numbered_anchors() -> None:
    assert anchors("# Runs\n## Runs\n## A run's *state*, in [words](x.md)\n") == {
        "runs",
        "runs-1",
        "a-runs-state-in-words",
    }


def test_a_pointer_outside_the_repository_is_reported(tmp_path: Path) -> None:
    files = [
        _write(tmp_path, "a.py", f"# see {FORBIDDEN[0]}/spec\n"),
        _write(tmp_path, "b.md", f"ok\nread {FORBIDDEN[1]}\n"),
        _write(tmp_path, "c.txt", "nothing outside\n"),
    ]
    (tmp_path / "d.bin").write_bytes(b"\xff\xfe" + FORBIDDEN[2].encode())
    files.append(Path("d.bin"))
    assert outside_pointers(tmp_path, files) == [
        f"a.py:1: {FORBIDDEN[0]!r} is outside the repository",
        f"b.md:2: {FORBIDDEN[1]!r} is outside the repository",
    ]


@pytest.mark.parametrize("needle", FORBIDDEN)
def test_each_forbidden_pointer_is_looked_for(tmp_path: Path, needle: str) -> None:
    name = _write(tmp_path, "x.md", f"see {needle}\n")
    assert outside_pointers(tmp_path, [name]) != []


def test_a_documented_value_is_read_as_written() -> None:
    text = (
        "## Values the protocol leaves open\n\n| name | value | meaning |\n|---|---|---|\n"
        "| `A_MS` | 900 000 ms (15 min) | x |\n| `B` | 0.25 | y |\n"
        '| `C` | `"one"` | z |\n| `D` | `"x"`, `"y"` | w |\n| not a name | 3 | v |\n'
        "\n## The next section\n\n| `E` | 4 | u |\n"
    )
    assert documented_values(text) == {"A_MS": 900_000, "B": 0.25, "C": "one", "D": ("x", "y")}


def test_a_mention_of_a_missing_doc_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "docs/here.md", "# Here\n")
    files = [
        _write(tmp_path, "x.py", '"""See docs/here.md, and docs/gone.md for more."""\n'),
        _write(tmp_path, "y.md", "[a](docs/here.md) and not-docs/gone.md\n"),
    ]
    assert missing_docs(tmp_path, files) == ["x.py:1: docs/gone.md does not exist"]


# -- the code in the documents runs ----------------------------------------------------------------

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(document: Path) -> list[str]:
    """The ``python`` fenced blocks of a markdown file, in order."""
    return _PYTHON_BLOCK.findall(document.read_text(encoding="utf-8"))


def _readme_embedding() -> dict[str, Any]:
    """The README's embedding example, defined but not started: its last line, ``trio.run(main)``,
    is left for the test to run."""
    [block] = python_blocks(ROOT / "README.md")
    body, last = block.rstrip("\n").rsplit("\n", 1)
    assert last == "trio.run(main)"
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(body, "README.md", "exec"), namespace)
    return namespace


def test_the_readme_embedding_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    trio.run(_readme_embedding()["main"])
    assert capsys.readouterr().out == "done {'walked': 5} None\n"


async def test_the_readme_embedding_loop_ends_when_the_run_fails(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The same loop over a handler that always throws: the run spends its five attempts, waiting
    # out each backoff, and fails. The store reads virtual time here, so the backoffs cost nothing.
    def on_virtual_time(*args: Any, **kwargs: Any) -> Any:
        return scopehost_open(*args, clock=StoreClock(), **kwargs)

    scopehost_open = scopehost.open_scope_host
    monkeypatch.setattr(scopehost, "open_scope_host", on_virtual_time)
    namespace = _readme_embedding()

    async def broken(ctx: Any) -> None:
        raise RuntimeError("the source is down")

    namespace["walk"] = broken
    with trio.fail_after(120):  # virtual seconds; the backoffs add up to under 20
        await namespace["main"]()
    assert capsys.readouterr().out == "failed {} the source is down\n"


def test_every_python_block_of_the_simulating_page_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page's blocks, in order: a world file, a drawn world added to the same file, a
    # fragment of a scenario with inputs (which parses), a test that uses the fixture, a
    # Hypothesis test, then fragments of a step body (the racy post and the atomic one), which
    # parse. They are laid out as a user would lay them out (the world in
    # worlds/billing.py beside the tests) and run from another folder, which is what the absolute
    # paths are for.
    # The Services section's own blocks are one more world file, run by
    # tests/examples/test_services_docs.py.
    page = (ROOT / "docs" / "simulating-your-jobs.md").read_text(encoding="utf-8")
    services = re.search(r"^## Services: the job's outside world\n.*?(?=^## )", page, re.S | re.M)
    assert services is not None
    world, drawn, inputs, fixture_test, hypothesis_test, *fragments = _PYTHON_BLOCK.findall(
        page.replace(services.group(0), "")
    )
    assert "inputs=ORDERS" in inputs
    assert len(fragments) == 2
    for fragment in (inputs, *fragments):
        ast.parse(fragment)
    (tmp_path / "worlds").mkdir()
    billing = tmp_path / "worlds" / "billing.py"
    billing.write_text(f"{world}\n\n{drawn}", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    ran: list[int] = []

    def sims_worlds(scenario: str, seeds: range) -> int:  # the fixture, on two seeds to stay cheap
        ran.append(sims.check_worlds(scenario, seeds[:2]))
        return ran[-1]

    namespace: dict[str, Any] = {"__file__": str(tmp_path / "test_billing.py")}
    exec(compile(fixture_test, "test_billing.py", "exec"), namespace)
    namespace["test_the_invoice_survives_the_wire"](sims_worlds)
    assert ran == [2]

    namespace = {"__file__": str(tmp_path / "test_plans.py")}
    exec(compile(hypothesis_test, "test_plans.py", "exec"), namespace)
    # One plan, not the fifty Hypothesis would draw: the body is what is run as written here.
    namespace["test_no_plan_double_posts"].hypothesis.inner_test(plan=sims.FaultPlan(()))

    # What the drawn world is for: seeds that reach different edges of the spec (its probes),
    # where every seed of the fixed world tells one story under other ids; and no seed called not
    # as documented because a drawn fault missed.
    def stories(name: str) -> set[object]:
        return {sims.simulate(f"{billing}:{name}", seed).report.probes for seed in range(8)}

    assert len(stories("nightly-invoice-swarm")) > 1
    assert len(stories("nightly-invoice")) == 1
    assert not any(
        sims.simulate(f"{billing}:nightly-invoice-swarm", seed).mismatches for seed in range(12)
    )

    # The figures the page quotes for the drawn world's sweep are the sweep's own: the probes it
    # reaches, and the faults that never fired (none of a kind the world cannot fire).
    page = (ROOT / "docs" / "simulating-your-jobs.md").read_text(encoding="utf-8")
    swept = sims.sweep(f"{billing}:nightly-invoice-swarm", range(200), jobs=2)
    report = list(swept.lines(spec_probes=True))  # as `--spec-probes` prints it, as the page says
    reached = re.search(r"it reaches (\d+) of the (\d+)\s+probes", page)
    assert reached is not None
    assert f"  probes hit: {reached[1]} of {reached[2]}" in report
    [quoted] = re.findall(r"```\n(  faults that never fired: .*?)```", page, re.S)
    start = report.index(quoted.splitlines()[0])
    assert report[start : start + len(quoted.splitlines())] == quoted.splitlines()


async def _paying(ctx: sims.JobPassContext) -> sims.JobPassResult:
    """A handler that pays in a step (with a timeout, an idempotency key, and a log call in a
    ``finally:`` that a kill fences), for the trace-format test's worlds with a service."""

    async def body() -> str:
        try:
            await sims.call_service(ctx, "bank", "pay", {"order": "o-1"}, timeout_ms=2_000)
        except sims.ServiceError:
            pass
        finally:
            await sims.call_service(ctx, "bank", "log", {"order": "log"})
        return "paid"

    await ctx.step("pay", body)
    return sims.JobPassResult(done=True)


def _count(state: dict[str, int], args: dict[str, Any]) -> int:
    state[args["order"]] = state.get(args["order"], 0) + 1
    return state[args["order"]]


def provider_traces() -> list[sims.Trace]:
    """The test world of a provider's own behaviour, under plans that make each of its events
    happen: a stale read, a partial batch, a rate limit, work held by an outage, a callback lost,
    sent twice, refused by a drive that is down until the service gives up, and a warning."""
    world = f"{ROOT / 'tests' / 'sims' / 'worlds' / 'providers.py'}"
    plans: list[sims.Fault] = [
        sims.StaleRead(operation="card.search", nth=1),
        sims.RateLimited(service="mail", nth=1, retry_after_ms=1_500.0),
        sims.ServiceOutage(service="card", from_ms=3_000.0, to_ms=9_000.0),
        sims.DropCallback(service="card", nth=1, leg="reply"),
        sims.RepeatCallback(service="card", nth=1, after_ms=0.0),
        sims.DelayCallback(service="card", nth=1, ms=2_000.0),
        sims.PartialBatch(operation="mail.send", nth=1, taken=1),
        sims.CrashDrive(drive="web", at_ms=3_000.0, down_ms=10_000.0),
    ]
    traces = [
        sims.simulate(f"{world}:provider", 1, plan=sims.FaultPlan((fault,))).outcome.trace
        for fault in plans
    ]
    traces.append(sims.simulate(f"{world}:empty-container", 1).outcome.trace)
    return traces


def service_worlds() -> list[sims.WorldOutcome]:
    """Worlds with a service, under plans that make each of its events happen: a reply past the
    caller's timeout, a lost reply, a request given up and delivered late, a crash right after a
    call (its ``finally:`` fenced), a hold released by another drive's effect, an outage, and a
    call still on the wire when the world's grace runs out."""
    bank = sims.Service(
        "bank",
        operations={"pay": sims.Operation(_count, idempotency_key="order"), "log": _count},
        latency_ms=5.0,
    )

    def outcome(fault: sims.Fault, grace_ms: float = 60_000.0) -> sims.WorldOutcome:
        async def drive(world: sims.World) -> None:
            world.add_drive(sims.DriveSpec(name="cron"))
            world.add_drive(sims.DriveSpec(name="alarm"))
            world.add_job("shop", "pay", _paying)
            world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=20_000)
            world.every("alarm", "s", every_ms=1_000, first_ms=500, until_ms=20_000)
            await world.start("cron", "s", "shop", "pay")
            await world.settle(("s",), horizon_ms=20_000, poll_ms=500)

        plan = sims.FaultPlan((fault,))
        setup = sims.WorldSetup(scopes=("s",), services=(bank,), plan=plan, grace_ms=grace_ms)
        return sims.run_world(1, setup, drive)

    pay, log = "bank.pay", "bank.log"
    return [
        outcome(sims.DelayLeg(drive="cron", operation=pay, nth=1, leg="reply", ms=3_000.0)),
        outcome(sims.DropLeg(drive="cron", operation=pay, nth=1, leg="reply")),
        outcome(sims.LateRequest(drive="cron", operation=pay, nth=1, ms=1_000.0)),
        outcome(sims.CrashAfter(drive="cron", operation=pay, nth=1)),
        outcome(sims.HoldLeg(drive="cron", operation=log, nth=1, leg="reply", until="effect")),
        outcome(sims.ServiceOutage(service="bank", from_ms=0.0, to_ms=500.0)),
        outcome(
            sims.DelayLeg(drive="cron", operation=log, nth=1, leg="request", ms=30_000.0),
            grace_ms=100.0,
        ),
    ]


def test_the_trace_format_lists_every_event_a_world_writes() -> None:
    # Worlds that drop legs, deliver requests late and leave faults unfired, and worlds with a
    # service whose calls time out, come late, are lost, refused, fenced and cut, so that every
    # event kind is written; a fault's, a service call's and the world's own events are checked
    # field by field too (a world.note carries any fields its writer gives).
    page = (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8")
    drop = sims.DropLeg(drive="cron", operation="claim", nth=1, leg="request")
    simulations = [sims.simulate("random", seed) for seed in range(12)]
    simulations.append(sims.simulate("late-begin", 1, plan=sims.FaultPlan((drop,))))
    traces = [simulation.outcome.trace for simulation in simulations]
    traces += [outcome.trace for outcome in service_worlds()]
    traces += provider_traces()
    fields: dict[str, set[str]] = {}
    for trace in traces:
        for event in trace.events:
            fields.setdefault(event["ev"], set()).update(set(event) - {"t", "ev"})
    assert {"fault.drop", "world.unfired", "fault.late", "rpc.late"} <= set(fields)
    services = {"svc.timeout", "svc.late", "svc.drop", "svc.abandon", "world.cut", "world.quiet"}
    assert services <= set(fields)
    assert {"refused", "repeat", "lag_ms", "stale", "batch", "retry_after_ms"} <= fields["svc.exec"]
    provider = {"svc.own.held", "svc.callback.refused", "svc.callback.abandoned", "svc.warn"}
    provider |= {"svc.callback.late"}
    assert provider <= set(fields)
    assert {"by", "by_op"} <= fields["fault.release"]
    rows = {
        name: line
        for line in page.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([a-z]+(?:\.[a-z]+)+)`", line.split("|")[1])
    }
    assert sorted(set(fields) - set(rows)) == []
    # The fields every service call's event carries are named once, above the section's table.
    common = page.partition("## Services")[2].partition("| event |")[0]
    for name, keys in sorted(fields.items()):
        if name.startswith(("fault.", "world.", "svc.")) and name != "world.note":
            documented = rows[name].split("|")[2] + (common if name.startswith("svc.") else "")
            missing = sorted(key for key in keys if f"`{key}`" not in documented)
            assert missing == [], f"{name} writes {missing}, which trace-format.md does not list"


def test_the_readme_counts_the_mutants_there_are() -> None:
    from sims.mutants._catalog import MUTANTS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert (
        f"`--mutant NAME` runs a deliberately broken store or kernel ({len(MUTANTS)} of them"
        in (" ".join(readme.split()))
    )
