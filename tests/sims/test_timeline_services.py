"""The job's outside world on the timeline and in the story: a lane per service with each call where
it ran, ambiguous outcomes, late effects, named door operations, the world's end, and what let a
held leg go.

Each world below is two drives and one job whose step calls services, run under a plan that makes
one case happen; the tests read the page, the terminal text and the story drawn from its trace.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import xml.etree.ElementTree as ET
from typing import Any, Literal

import pytest

from sims import (
    NO_FAULTS,
    CrashAfter,
    DelayLeg,
    DriveSpec,
    DropLeg,
    FaultPlan,
    HoldLeg,
    JobPassContext,
    JobPassResult,
    LateRequest,
    ServiceError,
    World,
    WorldOutcome,
    WorldSetup,
    call_service,
    record_effect,
    run_world,
    story_lines,
)
from sims._numbers import ms
from sims._trace import Trace
from sims.timeline._legend import legend_items
from sims.timeline._model import ServiceCall
from sims.timeline._reader import build_timeline
from sims.timeline._render import render_html, render_terminal, short
from sims.timeline._text import _Text

from .test_services import BANK, MAILER
from .test_timeline import _pieces, _svg, _x_of

SVG = "{http://www.w3.org/2000/svg}"


def cancel_sub(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> bool:
    """A door operation of the world's own: a provider's cancellation, in the scope."""
    conn.execute("CREATE TABLE IF NOT EXISTS subs (id TEXT PRIMARY KEY, cancelled INTEGER)")
    conn.execute("INSERT OR REPLACE INTO subs VALUES (?, 1)", (args["sub"],))
    return True


def calls(*operations: str, timeout_ms: float | None = None) -> Any:
    """A handler whose one step calls each of ``operations`` in turn, shrugging off errors."""

    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            for operation in operations:
                service, op = operation.split(".")
                with contextlib.suppress(ServiceError):
                    await call_service(ctx, service, op, {"order": "o-1"}, timeout_ms=timeout_ms)
            return "called"

        await ctx.step("call", body)
        return JobPassResult(done=True)

    return handler


async def notify(ctx: JobPassContext) -> JobPassResult:
    """Looks, mails, and records that it did: a slow look makes a stale pass of it."""

    async def body() -> str:
        await call_service(ctx, "mailer", "look", {})
        await call_service(ctx, "mailer", "send", {"order": "o-1"})
        await record_effect(ctx, "notify")
        return "sent"

    await ctx.step("notify", body)
    return JobPassResult(done=True)


async def cancel(ctx: JobPassContext) -> JobPassResult:
    async def body() -> bool:
        door = await ctx.scope()
        return bool(await door.invoke("provider_cancel_sub", {"sub": "s-1"}))

    await ctx.step("cancel", body)
    return JobPassResult(done=True)


def _pay(
    leg: Literal["request", "reply"], fault: type[DelayLeg | DropLeg], **more: Any
) -> FaultPlan:
    """A plan with one fault on the cron's first bank.pay."""
    return FaultPlan((fault(drive="cron", operation="bank.pay", nth=1, leg=leg, **more),))


#: name -> (handler, plan, grace_ms): each world makes one case happen.
WORLDS: dict[str, tuple[Any, FaultPlan, float]] = {
    "lanes": (
        calls(
            "bank.pay", "bank.look", "bank.pay_once", "bank.pay_once", "bank.decline", "mailer.send"
        ),
        NO_FAULTS,
        60_000.0,
    ),
    # The reply is held past the caller's timeout, and arrives after it gave up.
    "timeout": (calls("bank.pay", timeout_ms=8_000), _pay("reply", DelayLeg, ms=9_000.0), 6e4),
    # The reply is lost: a caller without a timeout is told at once, one with it at its end.
    "lost-reply": (calls("bank.pay"), _pay("reply", DropLeg), 6e4),
    "lost-reply-timeout": (calls("bank.pay", timeout_ms=3_000), _pay("reply", DropLeg), 6e4),
    # The caller gives the request up at once; the wire delivers it 4 s later, and it runs.
    "given-up": (
        calls("bank.pay"),
        FaultPlan((LateRequest(drive="cron", operation="bank.pay", nth=1, ms=4_000.0),)),
        6e4,
    ),
    # The request arrives after the caller's timeout ran out.
    "slow-request": (
        calls("bank.pay", timeout_ms=1_000),
        _pay("request", DelayLeg, ms=3_000.0),
        6e4,
    ),
    "lost-request": (calls("bank.pay"), _pay("request", DropLeg), 6e4),
    # The cron's look is answered after its lease ran out: the alarm takes the run over and ends
    # it, the scenario returns, and the cron's stale pass mails and records all the same.
    "stale": (
        notify,
        FaultPlan(
            (DelayLeg(drive="cron", operation="mailer.look", nth=1, leg="reply", ms=3_000.0),)
        ),
        6e4,
    ),
    "cut": (calls("bank.pay", timeout_ms=8_000), _pay("reply", DelayLeg, ms=9_000.0), 100.0),
    "door-delayed": (
        cancel,
        FaultPlan((DelayLeg(drive="cron", operation="invoke", nth=1, leg="reply", ms=400.0),)),
        6e4,
    ),
    "door-crash": (
        cancel,
        FaultPlan((CrashAfter(drive="cron", operation="invoke", nth=1, down_ms=100.0),)),
        6e4,
    ),
    "held-until-effect": (
        calls("bank.look", "bank.pay_once"),
        FaultPlan(
            (HoldLeg(drive="cron", operation="bank.look", nth=1, leg="reply", until="effect"),)
        ),
        6e4,
    ),
    "held-to-max": (
        calls("bank.look", "bank.pay_once"),
        FaultPlan(
            (
                HoldLeg(
                    drive="cron",
                    operation="bank.look",
                    nth=1,
                    leg="reply",
                    until="commit",
                    max_ms=50.0,
                ),
            )
        ),
        6e4,
    ),
}


@functools.cache
def _world(name: str) -> WorldOutcome:
    handler, plan, grace_ms = WORLDS[name]

    async def drive(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_drive(DriveSpec(name="alarm"))
        world.add_job("shop", "job", handler)
        await world.start("cron", "s", "shop", "job", payload={"order": "o-1"})
        world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=20_000)
        world.every("alarm", "s", every_ms=1_000, first_ms=500, until_ms=20_000)
        await world.settle(("s",), horizon_ms=20_000, poll_ms=500)

    setup = WorldSetup(
        scopes=("s",),
        services=(BANK, MAILER),
        operations={"provider_cancel_sub": cancel_sub},
        plan=plan,
        grace_ms=grace_ms,
    )
    outcome = run_world(1, setup, drive)
    assert outcome.unfired == ()
    return outcome


def _trace(name: str) -> Trace:
    return _world(name).trace


def _events(name: str, *kinds: str) -> list[dict[str, Any]]:
    return list(_trace(name).of(*kinds))


def _story(name: str) -> str:
    return "\n".join(story_lines(_trace(name).events, limit=10_000))


@functools.cache
def _page(name: str) -> str:
    return render_html(_trace(name), title=name)


def _drawn(name: str, kind: str) -> list[ET.Element]:
    return [e for e in _svg(_page(name)).iter() if e.get("data-k") == kind]


def _titles(element: ET.Element) -> str:
    return " ".join((t.text or "").replace("\u2009", "") for t in element.iter(f"{SVG}title"))


def _row_mid(name: str, op: str) -> float:
    """The middle of an operation's row, from its label at the left of the lane."""
    (label,) = [
        e for e in _svg(_page(name)).iter(f"{SVG}text") if e.get("x") == "18" and _shown(e) == op
    ]
    return float(label.get("y", "nan")) - 4


def _shown(text: ET.Element) -> str:
    """What a text element shows (its hover title, a child, left out)."""
    return (text.text or "") + "".join(child.tail or "" for child in text)


def _glyph_y(glyph: ET.Element) -> float:
    shape = glyph[0]
    if shape.tag == f"{SVG}circle":
        return float(shape.get("cy", "nan"))
    if shape.tag == f"{SVG}rect":
        return float(shape.get("y", "nan")) + float(shape.get("height", "nan")) / 2
    found = re.match(r"M([\d.]+),([\d.]+)", shape.get("d", ""))  # a cross: from its corner
    assert found is not None
    return float(found.group(2)) + 4


def _text_rows(name: str) -> dict[str, str]:
    """The terminal text's rows, by their label."""
    rows = {}
    for line in render_terminal(_trace(name), width=100).splitlines():
        if re.match(r"^\S[^|]*\|.*\|$", line):
            label, body, _ = line.split("|")
            rows[label.strip()] = body
    return rows


def _col(name: str, t: float) -> int:
    return _Text(build_timeline(_trace(name)), 100).col(t)


def _call(name: str, drive: str = "cron", op: str = "bank.pay") -> ServiceCall:
    found = [c for c in build_timeline(_trace(name)).calls if c.drive == drive and c.op == op]
    return found[0]


def _id(ident: str) -> str:
    """An id as the story writes it."""
    return ident[-6:]


# -- a lane per service, each call where it ran -----------------------------------------------

KINDS = {"effect": "svc-effect", "read": "svc-read", "repeat": "svc-repeat"}
LETTERS = {"svc-effect": "A", "svc-read": "a", "svc-repeat": "=", "svc-refused": "x"}
WORDS = {
    "svc-effect": "an effect",
    "svc-read": "no effect (it changed nothing at the service)",
    "svc-repeat": (
        "a repeat, answered by its idempotency key with the first result (it did not run again)"
    ),
    "svc-refused": "refused (card declined): it did not run",
}
LABELS = {
    "svc-effect": "effect",
    "svc-read": "read",
    "svc-repeat": "repeat (idempotency key)",
    "svc-refused": "refused",
}


def _kind(event: dict[str, Any]) -> str:
    if "refused" in event:
        return "svc-refused"
    if event.get("repeat"):
        return "svc-repeat"
    return "svc-effect" if event["effect"] else "svc-read"


def test_each_call_is_drawn_on_its_services_lane_where_it_ran_and_labelled() -> None:
    page = _page("lanes")
    svg, pieces = _svg(page), _pieces(page)
    texts = {_shown(e) for e in svg.iter(f"{SVG}text")}
    assert {"service bank", "service mailer"} <= texts
    ran = _events("lanes", "svc.exec")
    assert [e["op"] for e in ran] == [
        "bank.pay",
        "bank.look",
        "bank.pay_once",
        "bank.pay_once",
        "bank.decline",
        "mailer.send",
    ]
    run = ran[0]["run"]
    labels = {(g.findtext(f"{SVG}text") or "") for g in svg.iter(f"{SVG}g")}
    rows = _text_rows("lanes")
    story = _story("lanes")
    for event in ran:
        kind = _kind(event)
        x = _x_of(pieces, event["t"])
        (glyph,) = [
            g for g in _drawn("lanes", kind) if abs(float(g.get("data-x", "nan")) - x) < 0.1
        ]
        # On its operation's row, where it ran, saying so when hovered.
        assert abs(_glyph_y(glyph) - _row_mid("lanes", event["op"])) < 0.5
        assert f"cron's {event['op']} for run {short(run)}" in _titles(glyph)
        # Labelled by its operation, its caller and what it was (shown where it fits).
        assert f"{event['op']} · cron {short(run)} · {LABELS[kind]}" in labels
        # The text draws it in its caller's letter, in its operation's row.
        assert rows[event["op"]][_col("lanes", event["t"])] == LETTERS[kind]
        # The story names it.
        where = "reached bank at" if kind == "svc-refused" else "ran at"
        assert (
            f"cron's {event['op']} for run {_id(run)} {where} {ms(event['t'])} ms: {WORDS[kind]}"
        ) in story
    # A call's line runs from when it was sent to when its caller had its answer.
    lines = _drawn("lanes", "svc-call")
    assert lines
    assert all(float(e.get("width", "0")) > 0 for e in lines)


def test_a_plain_world_draws_and_tells_nothing_ambiguous_and_nothing_late() -> None:
    for kind in ("ambiguous", "late-effect", "world-quiet", "world-cut"):
        assert not _drawn("lanes", kind)
    assert "AMBIGUOUS" not in _story("lanes")
    assert "LATE EFFECT" not in _story("lanes")
    assert not [row for label, row in _text_rows("lanes").items() if "?" in row or "!" in row]


# -- ambiguous outcomes -----------------------------------------------------------------------


def _fate(name: str) -> str:
    """What the cron's call's line must say of it, from the trace's own events."""
    timeout = _events(name, "svc.timeout")
    if name == "timeout":
        (late,) = _events(name, "svc.late")
        return (
            f"the caller's 8000 ms timeout ran out at {ms(timeout[0]['t'])} ms, before its reply "
            f"came; its reply came at {ms(late['t'])} ms, after the caller had given up"
        )
    if name == "lost-reply":
        return "its reply was lost, so the caller saw a timeout at once (a lost connection)"
    if name == "lost-reply-timeout":
        return f"its reply was lost, so the caller saw a timeout at {ms(timeout[0]['t'])} ms"
    (late,) = _events(name, "svc.late")
    reply = f"; its reply came at {ms(late['t'])} ms, after the caller had given up"
    if name == "given-up":
        (abandoned,) = _events(name, "svc.abandon")
        return (
            f"the caller had given it up at {ms(abandoned['t'])} ms (a late request) and saw a "
            f"timeout; the wire delivered it anyway{reply}"
        )
    return (
        f"it arrived after the caller's 1000 ms timeout had run out at {ms(timeout[0]['t'])} ms"
        f"{reply}"
    )


#: Each case, and the event at which the caller was told it did not know.
AMBIGUOUS = {
    "timeout": "svc.timeout",
    "lost-reply": "svc.drop",
    "lost-reply-timeout": "svc.timeout",
    "given-up": "svc.abandon",
    "slow-request": "svc.timeout",
}


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_an_ambiguous_outcome_is_drawn_and_named(name: str) -> None:
    (doubt,) = [e for e in _events(name, AMBIGUOUS[name]) if e["drive"] == "cron"]
    (ran,) = [e for e in _events(name, "svc.exec") if e["drive"] == "cron"]
    call = _call(name)
    assert call.ambiguous
    assert call.doubted_at == doubt["t"]
    assert call.ran_at == ran["t"]
    page = _page(name)
    pieces = _pieces(page)
    # On the service's row: from where it ran to where its caller gave up (or its late reply came).
    ends = [t for t in (ran["t"], doubt["t"], *(e["t"] for e in _events(name, "svc.late"))) if t]
    (span,) = [e for e in _drawn(name, "ambiguous") if e.tag == f"{SVG}line"]
    assert abs(float(span.get("x1", "nan")) - _x_of(pieces, min(ends))) < 0.1
    assert abs(float(span.get("x2", "nan")) - max(_x_of(pieces, max(ends)), 0)) < 1.1
    assert abs(float(span.get("y1", "nan")) - (_row_mid(name, "bank.pay") + 9)) < 0.5
    # On the caller's lane: a "?" where it was told it did not know.
    marks = [
        g
        for g in _drawn(name, "ambiguous")
        if g.tag == f"{SVG}g"
        and abs(float(g.get("data-x", "nan")) - _x_of(pieces, doubt["t"])) < 0.1
    ]
    assert any(
        [_shown(t) for t in g.iter(f"{SVG}text")] == ["?"] and "AMBIGUOUS" in _titles(g)
        for g in marks
    )
    # The story tells the call by its name, what the caller saw, and that it is ambiguous.
    run = _id(ran["run"])
    (told,) = [line for line in _story(name).splitlines() if "cron's bank.pay" in line]
    assert (
        f"cron's bank.pay for run {run} ran at {ms(ran['t'])} ms: an effect; {_fate(name)} — an "
        "AMBIGUOUS outcome: it ran, and its caller does not know it did"
    ) in told
    # The text marks it, and says it in a note.
    assert "?" in _text_rows(name)["bank.pay"]
    assert f"ambiguous: cron's bank.pay for run {short(ran['run'])} ran at" in render_terminal(
        _trace(name), width=100
    ).replace("\n    ", " ")


def test_a_timeout_tells_what_the_caller_cannot_know_and_a_late_reply_that_it_reached_no_one() -> (
    None
):
    story = _story("timeout")
    (ran,) = [e for e in _events("timeout", "svc.exec") if e["drive"] == "cron"]
    run = _id(ran["run"])
    assert (
        f"its bank.pay for run {run} times out: it cannot know whether it ran (it had run, at "
        f"{ms(ran['t'])} ms: an effect) — an AMBIGUOUS outcome"
    ) in story
    assert (
        f"the reply to its bank.pay for run {run} (an effect) arrives after it gave up: it reaches "
        "no one — an AMBIGUOUS outcome"
    ) in story
    assert "(it runs later, at" in _story("slow-request")


def test_a_lost_request_never_ran_and_is_not_ambiguous() -> None:
    call = _call("lost-request")
    assert call.ran_at is None
    assert not call.ambiguous
    (dropped,) = _events("lost-request", "svc.drop")
    (lost,) = _drawn("lost-request", "svc-lost")
    assert (
        abs(float(lost.get("data-x", "nan")) - _x_of(_pieces(_page("lost-request")), dropped["t"]))
        < 0.1
    )
    assert "its request was lost on the way: it never ran" in _titles(lost)
    story = _story("lost-request")
    assert (
        "fault: the request of bank.pay call 1 was dropped (it did not run at bank; its caller "
        "sees a timeout)"
    ) in story
    assert "AMBIGUOUS" not in story
    assert not _drawn("lost-request", "ambiguous")
    assert _text_rows("lost-request")["bank.pay"][_col("lost-request", dropped["t"])] == "-"


# -- the same effect again, late effects ------------------------------------------------------


def test_a_stale_passs_late_effects_are_marked_where_they_landed() -> None:
    trace = _trace("stale")
    model = build_timeline(trace)
    cron, alarm = next(p for p in model.passes if p.drive == "cron"), model.passes[-1]
    assert alarm.drive == "alarm"
    (takeover,) = [e for e in trace.of("rpc.exec") if e["op"] == "claim" and e["link"] == "alarm"]
    why = (
        f"its pass {_id(cron.owner)} had lost its lease of run {_id(cron.run)} to alarm's pass "
        f"{_id(alarm.owner)}, which claimed it at {ms(takeover['t'])} ms"
    )
    sends = [e for e in trace.of("svc.exec") if e["op"] == "mailer.send"]
    assert [e["drive"] for e in sends] == ["alarm", "cron"]
    late_send = sends[1]
    story = _story("stale")
    # The service effect: the same work again, landed late, told and ringed where it landed.
    assert (
        f"cron's mailer.send for run {_id(cron.run)} ran at {ms(late_send['t'])} ms: an effect, "
        "copy 2 of this mailer.send call (the same arguments, in the same run): the same work "
        f"landed again — a LATE EFFECT: {why}"
    ) in story
    pieces = _pieces(_page("stale"))
    rings = _drawn("stale", "late-effect")
    at_send = [
        r for r in rings if abs(float(r.get("data-x", "nan")) - _x_of(pieces, late_send["t"])) < 0.1
    ]
    (ring,) = [r for r in at_send if abs(_glyph_y(r) - _row_mid("stale", "mailer.send")) < 0.5]
    assert "LATE EFFECT" in _titles(ring)
    (again,) = [
        e
        for e in _drawn("stale", "duplicate")
        if abs(_glyph_y(e) - _row_mid("stale", "mailer.send")) < 0.5
    ]
    assert abs(float(again.get("data-x", "nan")) - _x_of(pieces, late_send["t"])) < 0.1
    # The scope's effect row the stale pass wrote after it: ringed on its run's row, and told.
    (effect,) = [e for e in model.effects if e.late is not None]
    assert effect.key == f"{cron.run}/notify"
    assert (
        f"a LATE EFFECT: the scope's record of {_id(cron.run)}/notify is written at "
        f"{ms(effect.t)} ms: {why}"
    ) in story
    (scope_ring,) = [
        r for r in rings if abs(float(r.get("data-x", "nan")) - _x_of(pieces, effect.t)) < 0.1
    ]
    assert "LATE effect" in _titles(scope_ring)
    # The alarm's own effects were not late.
    assert [c.late_effect for c in model.calls if c.drive == "alarm"] == [None, None]
    rows = _text_rows("stale")
    assert rows["mailer.send"][_col("stale", late_send["t"])] == "!"
    assert rows["s"][_col("stale", effect.t)] == "!"
    assert render_terminal(trace, width=100).count("note: late effect: ") == 2


def test_an_effect_landing_after_the_scenario_returned_is_late() -> None:
    (closing,) = _events("given-up", "world.closing")
    call = _call("given-up")
    assert call.ran_at is not None
    assert call.ran_at > closing["t"]
    assert (
        "— a LATE EFFECT: it landed after the scenario returned, at "
        f"{ms(closing['t'])} ms, while the world waited for what was still running"
    ) in _story("given-up")
    (ring,) = _drawn("given-up", "late-effect")
    assert (
        abs(float(ring.get("data-x", "nan")) - _x_of(_pieces(_page("given-up")), call.ran_at)) < 0.1
    )


# -- a door operation by its name -------------------------------------------------------------


def test_an_invoke_of_a_named_door_operation_is_told_by_that_name() -> None:
    story = _story("door-delayed")
    assert "fault: the reply of provider_cancel_sub (invoke call 1) is held 400 ms" in story
    assert "of invoke call 1" not in story
    (delay,) = [e for e in _drawn("door-delayed", "delay") if e.tag == f"{SVG}line"]
    assert re.search(
        r"delay: provider_cancel_sub \(invoke #\d+\) reply held 400\.0 ms", _titles(delay)
    )
    assert (
        "fault: killed right after its provider_cancel_sub (invoke call 1) ran in the scope, "
        "before its reply left"
    ) in _story("door-crash")
    (crash,) = _drawn("door-crash", "crash")
    assert "right after its provider_cancel_sub (invoke call 1, #" in _titles(crash)


# -- the world's end --------------------------------------------------------------------------


def test_the_worlds_end_is_told_when_a_pass_still_ran_and_stopped_by_itself() -> None:
    (closing,) = _events("lost-reply-timeout", "world.closing")
    (quiet,) = _events("lost-reply-timeout", "world.quiet")
    (run,) = [p["run"] for p in closing["passes"]]
    story = _story("lost-reply-timeout")
    assert (
        f"world    the scenario returned at {ms(closing['t'])} ms with 1 pass still running (cron "
        f"on run {_id(run)}); it stopped by itself at {ms(quiet['t'])} ms"
    ) in story
    assert "what was still running has stopped by itself: the world ends" in story
    pieces = _pieces(_page("lost-reply-timeout"))
    (returned,) = [e for e in _drawn("lost-reply-timeout", "closing") if e.tag == f"{SVG}line"]
    assert abs(float(returned.get("x1", "nan")) - _x_of(pieces, closing["t"])) < 0.1
    (stopped,) = _drawn("lost-reply-timeout", "world-quiet")
    assert abs(float(stopped.get("x1", "nan")) - _x_of(pieces, quiet["t"])) < 0.1
    # At the end of the axis.
    assert abs(float(stopped.get("x1", "nan")) - max(p[3] for p in pieces)) < 0.1
    row = _text_rows("lost-reply-timeout")["world end"]
    assert row[_col("lost-reply-timeout", closing["t"])] == "R"
    assert row[_col("lost-reply-timeout", quiet["t"])] == "Q"


def test_the_worlds_end_is_told_when_the_grace_cut_what_still_ran() -> None:
    (closing,) = _events("cut", "world.closing")
    (cut,) = _events("cut", "world.cut")
    (run,) = [p["run"] for p in cut["passes"]]
    running = f"1 pass still running (cron on run {_id(run)}) and 1 service call on the wire"
    story = _story("cut")
    assert (
        f"the scenario returned at {ms(closing['t'])} ms with {running}; they were cut at "
        f"{ms(cut['t'])} ms, after the grace of 100 ms"
    ) in story
    assert (
        f"the grace of 100 ms after the scenario returned ran out with {running}: the world was "
        "cut, and what it would have done next was not checked"
    ) in story
    page = _page("cut")
    (line,) = _drawn("cut", "world-cut")
    assert abs(float(line.get("x1", "nan")) - _x_of(_pieces(page), cut["t"])) < 0.1
    assert "cut after 100 ms of grace" in {_shown(e) for e in _svg(page).iter(f"{SVG}text")}
    assert _text_rows("cut")["world end"][_col("cut", cut["t"])] == "C"
    # A delay the cut cut short ends with the world, and says so, rather than stretch the axis.
    model = build_timeline(_trace("cut"))
    assert model.end == _trace("cut").events[-1]["t"]
    (delay,) = [m for m in model.marks if m.kind == "delay"]
    assert "the world ended first" in delay.title


def test_a_world_with_nothing_left_running_ends_when_its_scenario_returns() -> None:
    (closing,) = _events("lanes", "world.closing")
    assert (
        f"the scenario returned at {ms(closing['t'])} ms with nothing still running: the world ends"
    ) in _story("lanes")
    assert len(_drawn("lanes", "closing")) == 1


# -- what let a held leg go -------------------------------------------------------------------


def test_a_holds_release_names_what_released_it() -> None:
    story = _story("held-until-effect")
    assert (
        "the held reply of bank.look call 1 is released when alarm's bank.pay_once ran (an effect)"
    ) in story
    (held,) = [e for e in _drawn("held-until-effect", "delay") if e.tag == f"{SVG}line"]
    assert "released when alarm's bank.pay_once ran (an effect)" in _titles(held)
    assert (
        "the held reply of bank.look call 1 is released at its max_ms: nothing it waited for "
        "happened in its longest hold"
    ) in _story("held-to-max")
    (held,) = [e for e in _drawn("held-to-max", "delay") if e.tag == f"{SVG}line"]
    assert "released at its max_ms, after 50.0 ms" in _titles(held)


# -- the legend -------------------------------------------------------------------------------

#: What the service lanes and the world's end draw.
NEW_KINDS = {
    "svc-call",
    "svc-effect",
    "svc-read",
    "svc-repeat",
    "svc-refused",
    "svc-lost",
    "duplicate",
    "ambiguous",
    "late-effect",
    "closing",
    "world-quiet",
    "world-cut",
}


def test_the_legend_explains_everything_the_service_lanes_draw() -> None:
    legend = {kind for kind, _, _ in legend_items()}
    drawn: set[str] = set()
    for name in WORLDS:
        svg = _svg(_page(name))
        kinds = {e.get("data-k") or "" for e in svg.iter() if e.get("data-k")}
        assert kinds <= legend, kinds - legend
        shown = {e.get("data-legend") for e in svg.iter() if e.get("data-legend")}
        assert kinds <= shown
        drawn |= kinds
    assert drawn >= NEW_KINDS


def test_the_same_operation_with_other_arguments_is_other_work_not_a_copy() -> None:
    async def two_stages(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            await call_service(ctx, "mailer", "send", {"order": "o-1", "stage": "onboarding"})
            await call_service(ctx, "mailer", "send", {"order": "o-1", "stage": "active"})
            await call_service(ctx, "mailer", "send", {"stage": "active", "order": "o-1"})
            return "sent"

        await ctx.step("stages", body)
        return JobPassResult(done=True)

    async def drive(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_job("crm", "stages", two_stages)
        await world.start("cron", "s", "crm", "stages")
        await world.tick("cron", "s")

    trace = run_world(1, WorldSetup(scopes=("s",), drives=("cron",), services=(MAILER,)), drive)
    story = [line for line in story_lines(trace.trace.events, limit=1_000) if "mailer.send" in line]
    said = [line.split(": ", 1)[1] for line in story if " ran at " in line]
    # The first two differ in their arguments; the third is the second again (keys in another
    # order are the same arguments).
    assert [words.startswith("an effect") for words in said] == [True, True, True]
    assert ["copy 2" in words for words in said] == [False, False, True]
