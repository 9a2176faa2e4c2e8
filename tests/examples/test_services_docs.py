"""The pages' words on services run as written: the code of the Services section of
docs/simulating-your-jobs.md is a world file that runs, and every command that section and
docs/fault-plans.md give for services exits as the page says it does."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path
from typing import Any

import pytest

from sims import (
    CrashAfter,
    DriveSpec,
    FaultPlan,
    JobPassContext,
    JobPassResult,
    Service,
    Trace,
    World,
    WorldSetup,
    call_service,
    plan_from_text,
    run_world,
    simulate,
)
from sims.cli._main import main

ROOT = Path(__file__).resolve().parents[2]
SIMULATING = ROOT / "docs" / "simulating-your-jobs.md"
FAULT_PLANS = ROOT / "docs" / "fault-plans.md"


def section(page: Path, heading: str) -> str:
    """The text of the ``## heading`` section of ``page``, up to the next ``## `` heading."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def blocks(text: str, *languages: str) -> list[str]:
    """The fenced blocks of markdown ``text`` whose info string is one of ``languages`` (``""``
    for a bare fence), in order."""
    found: list[str] = []
    language: str | None = None  # the open block's, or None outside any block
    lines: list[str] = []
    for line in text.splitlines():
        if language is None and line.startswith("```"):
            language, lines = line[3:].strip(), []
        elif language is not None and line.strip() == "```":
            if language in languages:
                found.append("\n".join(lines) + "\n")
            language = None
        elif language is not None:
            lines.append(line)
    return found


def commands(text: str) -> list[list[str]]:
    """Each ``python -m sims ...`` command of the shell blocks of ``text``, as its words, with its
    lines joined where they end in a backslash."""
    found = []
    for block in blocks(text, "sh", ""):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("python -m sims "):
                found.append(shlex.split(line))
    return found


SERVICES = section(SIMULATING, "Services: the job's outside world")


@pytest.fixture
def card_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The section's two code blocks, as the one world file it says they are, in a folder of
    worlds as a user lays them out; the tests run from that folder."""
    declaration, world, _check = blocks(SERVICES, "python")
    path = tmp_path / "worlds" / "card.py"
    path.parent.mkdir()
    path.write_text(f"{declaration}\n\n{world}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return path


def test_the_section_declares_a_provider_in_about_ten_lines() -> None:
    declaration, *_ = blocks(SERVICES, "python")
    code = [line for line in declaration.splitlines() if line.strip()]
    assert len(code) <= 14, declaration
    (fragment,) = blocks(SERVICES, "text")
    ast.parse(fragment)  # the kill that cannot be fenced: a fragment of a step body


def test_the_card_world_pays_once_under_the_sections_plan(
    card_world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = [words for words in commands(SERVICES) if "worlds/card.py:pay" in words]
    assert len(mine) == 1
    words = mine[0]
    assert main([*words[3:], "--trace", "t.jsonl"]) == 0
    assert "checks: every check held" in capsys.readouterr().out
    # What the section says happened: the second charge was answered from its key, and the held
    # reply came to nobody.
    trace = Trace.read("t.jsonl")
    charges = [e for e in trace.of("svc.exec") if e["op"] == "card.charge"]
    assert [(e["effect"], e.get("repeat", False)) for e in charges] == [
        (True, False),
        (False, True),
    ]
    assert [e["seq"] for e in trace.of("svc.late")] == [charges[0]["seq"]]


def test_the_card_world_without_its_key_would_pay_twice(card_world: Path) -> None:
    # The check the section uses can fail: the same world with a provider that keys nothing.
    text = card_world.read_text(encoding="utf-8")
    unkeyed = "Operation(charge, idempotent=True)"
    assert unkeyed in text
    card_world.with_name("unkeyed.py").write_text(text.replace(unkeyed, "charge"))
    plan = next(words for words in commands(SERVICES) if "worlds/card.py:pay" in words)[-1]
    simulation = simulate("worlds/unkeyed.py:pay", 1, plan=plan_from_text(plan))
    assert [f.check for f in simulation.report.violations] == ["card.charge-once-per-done-run"]


@pytest.mark.parametrize(
    "words",
    [words for words in commands(SERVICES) if "examples/" in " ".join(words)]
    + commands(section(FAULT_PLANS, "Faults on service calls"))
    + [
        words
        for words in commands(
            section(FAULT_PLANS, "Checked against the world before anything runs")
        )
        if "examples/" in " ".join(words)
    ],
    ids=lambda words: words[4],
)
def test_every_service_command_of_the_pages_exits_as_they_say(
    words: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    scenario = words[4].partition(":")[2]
    broken = {"pay-fallback", "receipt-no-key", "sync-find-then-create", "order-buggy"}
    refused = "upsrt" in words[-1]  # the misspelt call the page shows refused
    assert main(words[3:]) == (2 if refused else 1 if scenario in broken else 0)
    if refused:
        page = FAULT_PLANS.read_text(encoding="utf-8")
        (said,) = [
            line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")
        ]
        assert f"\n{said}\n" in page


def test_a_kill_fences_a_finally_from_a_service_and_not_from_a_plain_object() -> None:
    # The section's words, in a world: a killed drive's finally: appends to a list (nothing
    # stops it) while its call to the mailer is refused before it leaves.
    sent: list[str] = []

    def send(state: dict[str, Any], args: dict[str, Any]) -> int:
        state.setdefault("outbox", []).append(args["to"])
        return len(state["outbox"])

    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            try:
                await call_service(ctx, "mailer", "send", {"to": "ada"})
            finally:
                sent.append(f"{ctx.run.id} noted")  # NOT fenced
                await call_service(ctx, "mailer", "send", {"to": "audit"})  # fenced
            return "sent"

        await ctx.step("mail", body)
        return JobPassResult(done=True)

    async def drive(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_drive(DriveSpec(name="alarm"))
        world.add_job("shop", "mail", handler)
        world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=20_000)
        world.every("alarm", "s", every_ms=1_000, first_ms=500, until_ms=20_000)
        await world.start("cron", "s", "shop", "mail")
        await world.settle(("s",), horizon_ms=20_000, poll_ms=500)

    crash = CrashAfter(drive="cron", operation="mailer.send", nth=1, down_ms=5_000.0)
    mailer = Service("mailer", operations={"send": send})
    setup = WorldSetup(scopes=("s",), services=(mailer,), plan=FaultPlan((crash,)))
    outcome = run_world(1, setup, drive)
    fenced = [e for e in outcome.trace.of("fault.fence") if e["leg"] == "request"]
    assert [(e["drive"], e["op"]) for e in fenced] == [("cron", "mailer.send")]
    # The killed cron's finally: appended all the same, then the alarm's pass did too.
    assert len(sent) == 2
    audits = [e for e in outcome.trace.of("svc.send") if e["args"] == {"to": "audit"}]
    assert [e["drive"] for e in audits] == ["alarm"]
