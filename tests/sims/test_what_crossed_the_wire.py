"""What crossed the wire: every service call's arguments and result, and every service's state at
the world's end, in the story (shortened, or whole with ``--whole-values``), on the page's hover,
and for a check: ``sims.service_calls`` joins a call's events into one record, and
``sims.service_states`` reads the services' final states from ``world.end``.

The joins are held to hand-written traces, one call per way a call can end; the rest to the
payment example's ``pay-once`` under the plan its docstring gives (the cron's first charge
answered after its 5 s timeout ran out).
"""

from __future__ import annotations

import functools
import html
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sims import (
    DelayLeg,
    FaultPlan,
    ServiceCallRecord,
    Simulation,
    Trace,
    UserFinding,
    render_html,
    service_calls,
    service_states,
    simulate,
    story_lines,
)
from sims.cli._main import main
from sims.timeline._calls import STORY_CHARS
from sims.world._wire import OUTCOMES

ROOT = Path(__file__).resolve().parents[2]
PAY_ONCE = f"{ROOT / 'examples' / 'payment_provider.py'}:pay-once"
#: The cron's first charge answered 6 s late: after its caller's 5 s timeout ran out.
LATE_CHARGE = FaultPlan(
    (DelayLeg(drive="cron", operation="card.charge", nth=1, leg="reply", ms=6000.0),)
)
SVG = "{http://www.w3.org/2000/svg}"
RUN = "01J0000000000000000000RUN1"
OWNER = "01J000000000000000000PASS1"


# -- hand-written traces: one call per ending ---------------------------------------------------


def _send(t: float, seq: int, op: str, args: Any, **more: Any) -> dict[str, Any]:
    return {
        "ev": "svc.send", "t": t, "drive": "cron", "seq": seq, "run": RUN, "op": op,
        "service": op.split(".")[0], "args": args, "timeout_ms": more.pop("timeout_ms", None),
        **more,
    }  # fmt: skip


def _on(name: str, t: float, seq: int, op: str, **more: Any) -> dict[str, Any]:
    return {"ev": name, "t": t, "drive": "cron", "seq": seq, "run": RUN, "op": op, **more}


#: What was still running as the hand-written world closed: its last two calls.
STILL = {"passes": [], "ticks": [], "calls": 2, "requests": 0}
#: The hand-written world's services at its end: one too long for a story line.
STATES = {"bank": {"paid": list(range(40))}, "mailer": {}}


def _calls_trace() -> Trace:
    """One call for each way a call ends, and events of later versions among them."""
    long = {"order": "o-1", "note": "x" * 200}
    events = [
        {"ev": "world.begin", "t": 0.0, "format": 5, "seed": 1, "plan": "FaultPlan(())"},
        {"ev": "handler.invoke", "t": 1.0, "drive": "cron", "run": RUN, "owner": OWNER},
        # 1: replied, in a step, with an idempotency key.
        _send(2.0, 1, "bank.pay", {"order": "o-1"}, step="pay", key="o-1/pay", timeout_ms=5000.0),
        _on("svc.exec", 3.0, 1, "bank.pay", step="pay", result={"paid": 1}, effect=True),
        _on("svc.reply", 4.0, 1, "bank.pay", step="pay"),
        # 2: timed out, then its reply came late.
        _send(5.0, 2, "bank.pay", long, timeout_ms=10.0),
        _on("svc.exec", 6.0, 2, "bank.pay", result={"paid": 2}, effect=True),
        _on("svc.timeout", 15.0, 2, "bank.pay"),
        _on("svc.late", 20.0, 2, "bank.pay"),
        # 3: its request lost.
        _send(21.0, 3, "bank.pay", {"order": "o-3"}),
        _on("fault.drop", 22.0, 3, "bank.pay", nth=3, leg="request"),
        _on("svc.drop", 22.0, 3, "bank.pay", leg="request"),
        # 4: its reply lost.
        _send(23.0, 4, "bank.look", {}),
        _on("svc.exec", 24.0, 4, "bank.look", result=["o-1"], effect=False),
        _on("svc.drop", 24.0, 4, "bank.look", leg="reply"),
        # 5: refused; 6: declined, with a code.
        _send(25.0, 5, "bank.pay", {"order": "o-5"}),
        _on("svc.exec", 26.0, 5, "bank.pay", refused="bank is down", effect=False),
        _on("svc.reply", 27.0, 5, "bank.pay"),
        _send(28.0, 6, "bank.pay", {"order": "o-6"}),
        _on("svc.exec", 29.0, 6, "bank.pay", refused="no", declined=True, code="E1", effect=False),
        _on("svc.reply", 30.0, 6, "bank.pay"),
        # 7: a repeat its key answered.
        _send(31.0, 7, "bank.pay", {"order": "o-1"}, key="o-1/pay"),
        _on("svc.exec", 32.0, 7, "bank.pay", result={"paid": 1}, effect=False, repeat=True),
        _on("svc.reply", 33.0, 7, "bank.pay"),
        # 8: given up at once, and run when the wire delivered it.
        _send(34.0, 8, "bank.pay", {"order": "o-8"}),
        _on("svc.abandon", 35.0, 8, "bank.pay"),
        _on("svc.exec", 40.0, 8, "bank.pay", result={"paid": 3}, effect=True),
        _on("svc.late", 41.0, 8, "bank.pay"),
        # 9: its reply reached a killed drive.
        _send(42.0, 9, "bank.pay", {"order": "o-9"}),
        _on("svc.exec", 43.0, 9, "bank.pay", result={"paid": 4}, effect=True),
        _on("fault.fence", 44.0, 9, "bank.pay", leg="reply"),
        # A fence of a call that never left names no call; so do events of later versions.
        {"ev": "fault.fence", "t": 44.0, "drive": "cron", "op": "bank.pay", "leg": "request"},
        {"ev": "svc.later", "t": 44.5, "service": "bank", "work": "settle", "n": 1, "due_ms": 50}
        | {"by": "bank.pay"},
        {"ev": "svc.exec", "t": 45.0, "service": "bank", "work": "settle", "n": 1, "effect": True},
        {"ev": "svc.callback.arrive", "t": 45.5, "service": "bank", "cb": 1, "drive": "cron"}
        | {"endpoint": "hooks", "try": 1},
        {"ev": "svc.own.held", "t": 45.7, "service": "bank", "work": "settle", "n": 1}
        | {"until_ms": 60.0},
        # 10: no reply before the world ended; 11: never reached the service.
        _send(46.0, 10, "bank.pay", {"order": "o-10"}),
        _on("svc.exec", 47.0, 10, "bank.pay", result={"paid": 5}, effect=True),
        _send(48.0, 11, "mailer.send", {"order": "o-11"}),
        {"ev": "world.closing", "t": 50.0, "grace_ms": 100.0, **STILL},
        {"ev": "world.cut", "t": 150.0, "grace_ms": 100.0, **STILL},
        {"ev": "world.end", "t": 150.0, "runs": {}, "services": STATES},
    ]
    return Trace(events=events)


def test_service_calls_joins_each_calls_events_into_one_record() -> None:
    calls = service_calls(_calls_trace())
    assert [call.seq for call in calls] == list(range(1, 12))
    assert [call.outcome for call in calls] == [
        "replied",
        "timed out",
        "request lost",
        "reply lost",
        "refused",
        "declined",
        "replied",
        "given up",
        "fenced",
        "no reply",
        "never arrived",
    ]
    assert set(OUTCOMES) >= {call.outcome for call in calls}
    first = calls[0]
    assert first == ServiceCallRecord(
        service="bank",
        operation="pay",
        args={"order": "o-1"},
        key="o-1/pay",
        result={"paid": 1},
        effect=True,
        outcome="replied",
        drive="cron",
        seq=1,
        run=RUN,
        step="pay",
        sent_ms=2.0,
        ran_ms=3.0,
        replied_ms=4.0,
        repeat=False,
        arrived_ms=3.0,
        timeout_ms=5000.0,
        owner=OWNER,
    )
    assert (first.op, first.ran, first.ambiguous) == ("bank.pay", True, False)
    timed_out, lost, reply_lost, refused, declined, repeat, given_up, fenced, cut, never = calls[1:]
    # Ran, and its caller never had the answer (what a check of a timeout looks for); or not.
    assert [(c.ran_ms, c.replied_ms, c.ambiguous) for c in calls[1:]] == [
        (6.0, None, True),
        (None, None, False),
        (24.0, None, True),
        (None, 27.0, False),
        (None, 30.0, False),
        (32.0, 33.0, False),
        (40.0, None, True),
        (43.0, None, False),
        (47.0, None, False),
        (None, None, False),
    ]
    assert (timed_out.result, timed_out.effect) == ({"paid": 2}, True)
    assert lost.arrived_ms is None
    assert (reply_lost.result, reply_lost.effect) == (["o-1"], False)
    # A refusal and a decline reached the service and did not run; their callers heard so.
    assert (refused.arrived_ms, refused.refused, refused.result, refused.effect) == (
        26.0,
        "bank is down",
        None,
        False,
    )
    assert (declined.refused, declined.code) == ("no", "E1")
    assert (repeat.repeat, repeat.result, repeat.effect, repeat.key) == (
        True,
        {"paid": 1},
        False,
        "o-1/pay",
    )
    assert (given_up.result, fenced.result, cut.result) == ({"paid": 3}, {"paid": 4}, {"paid": 5})
    assert (never.service, never.operation, never.result, never.owner, never.step) == (
        "mailer",
        "send",
        None,
        OWNER,
        None,
    )
    assert never.timeout_ms is None


def test_service_states_reads_the_world_end_and_says_what_is_missing() -> None:
    assert service_states(_calls_trace()) == STATES
    without = Trace(events=[{"ev": "world.end", "t": 1.0, "runs": {}}])
    assert service_states(without) == {}
    assert service_calls(without) == []
    with pytest.raises(ValueError, match="this trace has none: a world writes it as it ends"):
        service_states(Trace(events=[{"ev": "world.begin", "t": 0.0}]))
    for read in (service_states, service_calls):
        with pytest.raises(ValueError, match=r"this world kept none \(WorldSetup\(trace=False\)"):
            read(Trace(enabled=False))


def _told(trace: Trace, **options: Any) -> list[str]:
    return list(story_lines(trace.events, limit=10_000, **options))


def test_the_story_tells_each_calls_arguments_and_result_cut_or_whole() -> None:
    trace = _calls_trace()
    story = _told(trace)
    (first,) = [line for line in story if "ran at 3 ms" in line]
    assert first.endswith(
        'cron\'s bank.pay for run 00RUN1 ran at 3 ms: an effect; args {"order":"o-1"}, '
        'idempotency key "o-1/pay"; result {"paid":1}'
    )
    # A long value is cut, with "…" where it was cut, and the last line says how to see it whole.
    (long,) = [line for line in story if "ran at 6 ms" in line]
    args = json.dumps({"note": "x" * 200, "order": "o-1"}, separators=(",", ":"))
    assert f"args {args[: STORY_CHARS - 1]}…; result " in long
    assert story[-1].endswith(
        f'… values longer than {STORY_CHARS} characters are cut where "…" ends them (run with '
        "--whole-values to see them whole)"
    )
    whole = _told(trace, whole_values=True)
    assert f"args {args}; result " in "\n".join(whole)
    assert "--whole-values" not in whole[-1]
    # A refusal has no result; a call that never reached its service is told where it was sent.
    (refused,) = [line for line in story if "reached bank at 26 ms" in line]
    assert refused.endswith('it did not run; args {"order":"o-5"}')
    (never,) = [line for line in story if "mailer.send" in line]
    assert never.split()[0] == "48.000"
    assert "sent at 48 ms, never ran: " in never
    assert never.endswith('args {"order":"o-11"}')
    (lost,) = [line for line in story if "sent at 21 ms" in line]
    assert lost.endswith('args {"order":"o-3"}')
    # The services' states at the world's end, by name, cut as the calls are.
    (end,) = [line for line in story if "the services at the world's end" in line]
    state = json.dumps({"paid": list(range(40))}, separators=(",", ":"))
    cut = f"{state[: STORY_CHARS - 1]}…"
    assert end.endswith(f"the services at the world's end: bank {cut}; mailer {{}}")
    (end,) = [line for line in whole if "the services at the world's end" in line]
    assert end.endswith(f"the services at the world's end: bank {state}; mailer {{}}")


def test_a_value_cut_only_in_lines_left_out_is_not_said_to_be_cut() -> None:
    trace = _calls_trace()
    story = list(story_lines(trace.events, limit=1))
    assert len(story) == 2
    assert "more lines" in story[-1]
    assert "--whole-values" not in "\n".join(story)


# -- a world: the payment example ----------------------------------------------------------------


@functools.cache
def _pay_once() -> Simulation:
    simulation = simulate(PAY_ONCE, 1, plan=LATE_CHARGE)
    assert simulation.ok, simulation.report.violations
    return simulation


#: What the cron's charge sends, and what the provider makes of it.
ORDER = {"cents": 4999, "key": "o-17/pay", "order": "o-17"}
MADE = {"id": "ch-1", "key": "o-17/pay", "order": "o-17"}
CHARGED = {**MADE, "cents": 4999, "refunded": False}


def documented_check() -> Callable[[Trace], list[UserFinding]]:
    """The check "What crossed the wire" in docs/simulating-your-jobs.md shows, run as written."""
    page = (ROOT / "docs" / "simulating-your-jobs.md").read_text(encoding="utf-8")
    section = page[page.index("\n### What crossed the wire\n") :]
    section = section[: section.index("\n### ", 1)]
    (code,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    namespace: dict[str, Any] = {}
    exec(compile(code, "simulating-your-jobs.md", "exec"), namespace)
    check: Callable[[Trace], list[UserFinding]] = namespace["one_charge_per_order"]
    return check


def test_a_worlds_calls_and_its_services_final_states_read_back_for_a_check() -> None:
    trace = _pay_once().outcome.trace
    charge, find, *again = service_calls(trace)
    assert (charge.drive, charge.op, charge.outcome) == ("cron", "card.charge", "timed out")
    assert (charge.args, charge.result, charge.effect, charge.step) == (ORDER, MADE, True, "pay")
    # Its timeout ran out before its reply came: it ran, and its caller does not know it.
    assert (charge.ambiguous, charge.replied_ms, charge.timeout_ms) == (True, None, 5000.0)
    assert charge.ran_ms is not None
    assert charge.sent_ms < charge.ran_ms
    assert charge.owner == next(trace.of("handler.invoke"))["owner"]
    # So it asks: a read, answered (the charge, or None while the provider's lookup lags).
    assert (find.op, find.args, find.outcome, find.effect) == (
        "card.find",
        {"key": "o-17/pay"},
        "replied",
        False,
    )
    assert find.result in (CHARGED, None)
    assert find.sent_ms >= charge.sent_ms + 5000.0
    # Found nothing yet: it charges again with the same key, which the provider answers from it.
    assert [(c.op, c.repeat, c.effect, c.result) for c in again] == (
        [("card.charge", True, False, MADE)] if find.result is None else []
    )
    assert {c.run for c in (charge, find, *again)} == {charge.run}
    # What the outside world holds at the end: one charge, and nothing moved by the bank.
    assert service_states(trace) == {"card": {"charges": [CHARGED]}, "bank": {}}
    # The docs' check reads it: one charge; and it would see a second.
    check = documented_check()
    assert check(trace) == []
    twice = service_states(trace)["card"]["charges"] * 2
    ended = {"ev": "world.end", "t": 0.0, "services": {"card": {"charges": twice}}}
    doubled = Trace(events=[ended])
    assert [f.text for f in check(doubled)] == ["order o-17 was charged 2 times"]


def test_run_tells_the_values_cut_and_whole_with_whole_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = repr(LATE_CHARGE)
    assert main(["run", PAY_ONCE, "--plan", plan]) == 0
    out = capsys.readouterr().out
    charge = next(line for line in out.splitlines() if "cron     cron's card.charge" in line)
    order, made = (_json(v) for v in (ORDER, MADE))
    assert charge.endswith(f"args {order}; result {made}")
    state = _json({"charges": [CHARGED]})
    assert len(state) > STORY_CHARS
    assert f"the services at the world's end: card {state[: STORY_CHARS - 1]}…; bank {{}}" in out
    assert "(run with --whole-values to see them whole)" in out
    assert main(["run", PAY_ONCE, "--plan", plan, "--whole-values"]) == 0
    out = capsys.readouterr().out
    assert f"the services at the world's end: card {state}; bank {{}}" in out
    assert "--whole-values to see them whole" not in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--whole-values" in capsys.readouterr().out


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _svg(page: str) -> ET.Element:
    start = page.index('<svg xmlns="http://www.w3.org/2000/svg" id="timeline"')
    return ET.fromstring(page[start : page.index("</svg>", start) + len("</svg>")])


def _hover(element: ET.Element) -> str:
    (title,) = element.iter(f"{SVG}title")
    return title.text or ""


def test_the_pages_hover_shows_what_crossed_the_wire_and_its_top_the_final_states() -> None:
    trace = _pay_once().outcome.trace
    page = render_html(trace, title="pay-once")
    svg = _svg(page)

    def drawn(kind: str) -> list[ET.Element]:
        return [e for e in svg.iter() if e.get("data-k") == kind]

    (charge,) = drawn("svc-effect")
    sentence, args, result = _hover(charge).split("\n")
    assert "cron's card.charge for run" in sentence
    assert "AMBIGUOUS" in sentence
    order, made, found = (_json(v) for v in (ORDER, MADE, service_calls(trace)[1].result))
    assert (args, result) == (f"args {order}", f"result {made}")
    # The lookup: its result whole while it is short (the hover has room the story has not).
    (find,) = drawn("svc-read")
    assert _hover(find).endswith(f'\nargs {{"key":"o-17/pay"}}\nresult {found}')
    # The service lane's label says, when hovered, what the service held at the world's end.
    state = _json({"charges": [CHARGED]})
    (label,) = [t for t in svg.iter(f"{SVG}title") if t.tail == "service card"]
    assert label.text == f"service card at the world's end: {state}"
    # The top of the page: each service's state at the end, whole while it is short.
    spaced = json.dumps({"charges": [CHARGED]}, sort_keys=True, separators=(", ", ": "))
    assert "<dt>services at the end</dt>" in page
    assert f"<li><b>card</b> <code>{html.escape(spaced)}</code></li>" in page
    assert "<li><b>bank</b> <code>{}</code></li>" in page


def test_a_world_without_services_reads_none_and_tells_no_states() -> None:
    trace = simulate("late-claim", 1).outcome.trace
    assert service_calls(trace) == []
    assert service_states(trace) == {}
    assert "services at the end" not in render_html(trace, title="late-claim")
    assert not [line for line in story_lines(trace.events) if "world's end:" in line]
