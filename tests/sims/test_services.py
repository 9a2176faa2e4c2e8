"""Services: the job's outside world, with its own legs, faults, timeouts and idempotency keys.

Each test builds a small world of two drives and one job whose handler calls services, runs it
under a plan that makes one thing happen, and reads the trace for what the handler saw and what
the service did.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from driver import ServiceDeclined, ValidationFailed
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
    Operation,
    Service,
    ServiceError,
    ServiceOutage,
    ServiceRefused,
    ServiceTimeout,
    World,
    WorldOutcome,
    WorldSetup,
    at_most_once,
    call_service,
    effects_at,
    effects_in,
    once_per_done_run,
    run_world,
)

Handler = Callable[[JobPassContext], Awaitable[JobPassResult | None]]


def pay(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("paid", []).append(args["order"])
    return {"charge": f"ch-{len(state['paid'])}"}


def refund(state: dict[str, Any], args: dict[str, Any]) -> bool:
    state.setdefault("refunded", []).append(args["order"])
    return True


def look(state: dict[str, Any], args: dict[str, Any]) -> list[str]:
    return list(state.get("paid", []))


def refuse(state: dict[str, Any], args: dict[str, Any]) -> None:
    raise ServiceRefused("card declined")


BANK = Service(
    "bank",
    operations={
        "pay": pay,
        "pay_once": Operation(pay, idempotency_key="order"),
        "refund": refund,
        "look": look,
        "decline": refuse,
    },
    latency_ms=5.0,
)
MAILER = Service("mailer", operations={"send": pay, "look": look}, latency_ms=2.0)


def world(
    handler: Handler,
    *,
    plan: FaultPlan = NO_FAULTS,
    services: tuple[Service, ...] = (BANK, MAILER),
    grace_ms: float = 60_000.0,
    seed: int = 1,
) -> WorldOutcome:
    async def drive(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_drive(DriveSpec(name="alarm"))
        world.add_job("shop", "job", handler)
        await world.start("cron", "s", "shop", "job", payload={"order": "o-1"})
        world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=20_000)
        world.every("alarm", "s", every_ms=1_000, first_ms=500, until_ms=20_000)
        await world.settle(("s",), horizon_ms=20_000, poll_ms=500)

    setup = WorldSetup(scopes=("s",), services=services, plan=plan, grace_ms=grace_ms)
    return run_world(seed, setup, drive)


def events(outcome: WorldOutcome, *names: str) -> list[dict[str, Any]]:
    return list(outcome.trace.of(*names))


def one_call(operation: str, args: dict[str, Any], **options: Any) -> tuple[Handler, list[Any]]:
    """A handler that calls ``operation`` once, in a step, and notes what it got back."""
    seen: list[Any] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            service, op = operation.split(".")
            try:
                seen.append(await call_service(ctx, service, op, args, **options))
            except ServiceError as error:
                seen.append(error)
            return "called"

        await ctx.step("call", body)
        return JobPassResult(done=True)

    return handler, seen


def test_a_call_runs_at_the_service_and_its_effect_counts_itself() -> None:
    handler, seen = one_call("bank.pay", {"order": "o-1"})
    outcome = world(handler)
    assert seen == [{"charge": "ch-1"}]
    (sent,) = events(outcome, "svc.send")
    (ran,) = events(outcome, "svc.exec")
    (replied,) = events(outcome, "svc.reply")
    assert sent["op"] == "bank.pay"
    assert sent["args"] == {"order": "o-1"}
    assert sent["step"] == "call"
    assert ran["effect"] is True
    assert ran["result"] == {"charge": "ch-1"}
    # Both legs take the service's latency: 5 ms there, 5 ms back.
    assert ran["t"] - sent["t"] == 5.0
    assert replied["t"] - ran["t"] == 5.0
    run = sent["run"]
    assert effects_in(outcome.trace) == {f"{run}/bank.pay": 1}
    assert effects_at(outcome.trace)[f"{run}/bank.pay"] == [ran["t"]]
    assert outcome.report.ok


def test_a_read_is_no_effect() -> None:
    handler, seen = one_call("bank.look", {})
    outcome = world(handler)
    assert seen == [[]]
    assert [e["effect"] for e in events(outcome, "svc.exec")] == [False]
    assert effects_in(outcome.trace) == {}


def test_an_idempotency_key_answers_a_repeat_with_the_first_result_unrun() -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        first = await call_service(ctx, "bank", "pay_once", {"order": "o-1"})
        again = await call_service(ctx, "bank", "pay_once", {"order": "o-1"})
        other = await call_service(ctx, "bank", "pay_once", {"order": "o-2"})
        assert first == again == {"charge": "ch-1"}
        assert other == {"charge": "ch-2"}
        return JobPassResult(done=True)

    outcome = world(handler)
    ran = events(outcome, "svc.exec")
    assert [(e["effect"], e.get("repeat", False)) for e in ran] == [
        (True, False),
        (False, True),
        (True, False),
    ]
    assert outcome.report.ok


def test_a_reply_held_past_the_callers_timeout_is_an_ambiguous_outcome() -> None:
    handler, seen = one_call("bank.pay", {"order": "o-1"}, timeout_ms=8_000)
    plan = FaultPlan((DelayLeg(drive="cron", operation="bank.pay", nth=1, leg="reply", ms=9_000),))
    outcome = world(handler, plan=plan)
    # The alarm took the run over meanwhile and paid; the cron's pass saw the timeout.
    (timed_out,) = [error for error in seen if isinstance(error, ServiceTimeout)]
    assert str(timed_out) == (
        "bank.pay #6 got no reply within its timeout: the operation may have run, or may still run"
    )
    (sent, timeout, late) = [
        e for e in events(outcome, "svc.send", "svc.timeout", "svc.late") if e["drive"] == "cron"
    ][:3]
    assert (sent["ev"], timeout["ev"], late["ev"]) == ("svc.send", "svc.timeout", "svc.late")
    assert timeout["t"] - sent["t"] == 8_000.0
    # It ran all the same, at the service, 5 ms after it was sent.
    assert events(outcome, "svc.exec")[0]["effect"] is True
    assert outcome.unfired == ()


@pytest.mark.parametrize(("timeout_ms", "after_ms"), [(None, 5.0), (3_000.0, 3_000.0)])
def test_a_lost_reply_is_a_timeout_at_once_or_at_the_callers_own(
    timeout_ms: float | None, after_ms: float
) -> None:
    handler, seen = one_call("bank.pay", {"order": "o-1"}, timeout_ms=timeout_ms)
    plan = FaultPlan((DropLeg(drive="cron", operation="bank.pay", nth=1, leg="reply"),))
    outcome = world(handler, plan=plan)
    assert any(isinstance(error, ServiceTimeout) for error in seen)
    sent = events(outcome, "svc.send")[0]
    dropped = events(outcome, "svc.drop")[0]
    assert dropped["leg"] == "reply"
    assert events(outcome, "svc.exec")[0]["effect"] is True
    # The body, which caught the timeout, ended when its caller learnt of the loss: at once (the
    # request took 5 ms to arrive), or when its own timeout ran out.
    ended = next(e for e in outcome.trace.of("hx.fn.end") if e["drive"] == "cron")
    assert ended["t"] - sent["t"] == after_ms


def test_a_lost_request_never_runs() -> None:
    handler, seen = one_call("bank.pay", {"order": "o-1"})
    plan = FaultPlan((DropLeg(drive="cron", operation="bank.pay", nth=1, leg="request"),))
    outcome = world(handler, plan=plan)
    assert isinstance(seen[0], ServiceTimeout)
    first = events(outcome, "svc.send")[0]
    assert not [e for e in events(outcome, "svc.exec") if e["seq"] == first["seq"]]


def test_a_request_given_up_arrives_later_and_runs() -> None:
    handler, seen = one_call("bank.pay", {"order": "o-1"})
    plan = FaultPlan((LateRequest(drive="cron", operation="bank.pay", nth=1, ms=4_000.0),))
    outcome = world(handler, plan=plan)
    assert isinstance(seen[0], ServiceTimeout)
    assert "may still arrive" in str(seen[0])
    first = events(outcome, "svc.send")[0]
    (abandoned,) = events(outcome, "svc.abandon")
    (ran,) = [e for e in events(outcome, "svc.exec") if e["seq"] == first["seq"]]
    assert ran["t"] - abandoned["t"] == 4_000.0
    assert ran["effect"] is True


def test_an_outage_refuses_what_arrives_in_its_window() -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        await call_service(ctx, "bank", "pay", {"order": "o-1"})  # a refusal fails the pass
        return JobPassResult(done=True)

    plan = FaultPlan((ServiceOutage(service="bank", from_ms=0.0, to_ms=1_000.0),))
    outcome = world(handler, plan=plan)
    ran = events(outcome, "svc.exec")
    assert ran[0]["refused"] == "bank is down (an outage from 0 ms)"
    assert ran[0]["t"] < 1_000
    (failed,) = [e for e in outcome.trace.of("hx.end") if "raised" in e]
    assert failed["raised"] == "bank is down (an outage from 0 ms)"
    # The pass after the window pays: the retry comes past the outage.
    assert ran[-1]["effect"] is True
    assert ran[-1]["t"] >= 1_000
    assert outcome.unfired == ()


def test_an_outage_no_request_reaches_never_fired() -> None:
    handler, _ = one_call("bank.pay", {"order": "o-1"})
    outage = ServiceOutage(service="bank", from_ms=5_000.0, to_ms=6_000.0)
    assert world(handler, plan=FaultPlan((outage,))).unfired == (outage,)


def test_an_operation_that_refuses_did_not_run() -> None:
    handler, seen = one_call("bank.decline", {})
    outcome = world(handler)
    assert isinstance(seen[0], ServiceRefused)
    assert str(seen[0]) == "card declined"
    assert all(e["effect"] is False for e in events(outcome, "svc.exec"))


def test_an_operation_that_writes_then_refuses_leaves_no_trace_of_it() -> None:
    def half(state: dict[str, Any], args: dict[str, Any]) -> None:
        state["written"] = True
        raise ServiceRefused("changed its mind")

    seen: list[Any] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        try:
            await call_service(ctx, "bank", "half", {"order": "o-1"})
        except ServiceRefused as refused:
            seen.append(str(refused))
        seen.append(await call_service(ctx, "bank", "state", {}))
        return JobPassResult(done=True)

    bank = Service("bank", operations={"half": half, "state": lambda state, args: state})
    outcome = world(handler, services=(bank,))
    assert seen == ["changed its mind", {}]
    assert [e["effect"] for e in events(outcome, "svc.exec")] == [False, False]


def test_transient_refusals_are_drawn_from_the_seed() -> None:
    flaky = Service("bank", operations={"pay": pay}, refuses=0.5)
    refusals = []
    for seed in range(6):
        handler, _ = one_call("bank.pay", {"order": "o-1"})
        outcome = world(handler, services=(flaky,), seed=seed)
        refusals.append(sum(1 for e in events(outcome, "svc.exec") if "refused" in e))
        again, _ = one_call("bank.pay", {"order": "o-1"})
        assert world(again, services=(flaky,), seed=seed).trace.digest() == outcome.trace.digest()
    assert min(refusals) == 0
    assert max(refusals) > 0


def test_nothing_crosses_the_wire_by_reference() -> None:
    def keep(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        state["kept"] = args["box"]
        args["box"].append("service's")
        return state

    box: list[str] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        result = await call_service(ctx, "store", "keep", {"box": box})
        result["kept"].append("caller's")
        assert await call_service(ctx, "store", "keep", {"box": box}) == {"kept": []}
        return JobPassResult(done=True)

    outcome = world(handler, services=(Service("store", operations={"keep": keep}),))
    assert box == []
    assert outcome.report.ok


def test_a_killed_drives_finally_reaches_no_service() -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            try:
                await call_service(ctx, "bank", "pay", {"order": "o-1"})
            finally:
                # THE "FIX" A KILL DEFEATS: undo on the way out.
                await call_service(ctx, "bank", "refund", {"order": "o-1"})
            return "paid"

        await ctx.step("pay", body)
        return JobPassResult(done=True)

    plan = FaultPlan((CrashAfter(drive="cron", operation="bank.pay", nth=1, down_ms=5_000.0),))
    outcome = world(handler, plan=plan)
    fenced = [e for e in events(outcome, "fault.fence") if e["op"] == "bank.refund"]
    assert fenced == [{"t": fenced[0]["t"], "ev": "fault.fence", "drive": "cron",
                       "op": "bank.refund", "leg": "request"}]  # fmt: skip
    refunds = [e for e in events(outcome, "svc.exec") if e["op"] == "bank.refund"]
    assert all(e["drive"] == "alarm" for e in refunds)


def test_a_stale_pass_runs_on_after_the_last_run_ended_and_its_late_effect_is_judged() -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def notify() -> str:
            await call_service(ctx, "mailer", "look", {})
            await call_service(ctx, "mailer", "send", {"order": "o-1"})
            return "sent"

        await ctx.step("notify", notify)
        return JobPassResult(done=True)

    # The cron's look is answered after its lease ran out: the alarm takes the run over and ends
    # it, the scenario returns, and the cron's stale pass goes on to send its mail.
    plan = FaultPlan((DelayLeg(drive="cron", operation="mailer.look", nth=1, leg="reply", ms=3e3),))
    outcome = world(handler, plan=plan)
    (closing,) = events(outcome, "world.closing")
    assert closing["passes"] == [{"drive": "cron", "run": closing["passes"][0]["run"]}]
    assert events(outcome, "world.quiet")
    assert not events(outcome, "world.cut")
    sends = [e for e in events(outcome, "svc.exec") if e["op"] == "mailer.send"]
    assert [e["drive"] for e in sends] == ["alarm", "cron"]
    assert sends[1]["t"] > closing["t"]
    check = at_most_once("mailer.send", key="order")
    (finding,) = check(outcome.trace)
    assert finding.text.startswith(
        "mailer.send with order='o-1' took effect 2 times: alarm's call #"
    )
    assert finding.at_ms == sends[1]["t"]
    assert "; cron's call #" in finding.text
    assert finding.text.endswith(f"sent at 3014 ms, ran at {sends[1]['t']:g} ms")
    (per_run,) = once_per_done_run("mailer.send")(outcome.trace)
    assert per_run.text.startswith("key ")
    assert " done) took mailer.send 2 times: alarm's call #" in per_run.text


def test_a_pass_the_grace_cuts_is_named_and_said_in_the_verdict() -> None:
    handler, _ = one_call("bank.pay", {"order": "o-1"})
    plan = FaultPlan((DelayLeg(drive="cron", operation="bank.pay", nth=1, leg="reply", ms=9e3),))
    outcome = world(handler, plan=plan, grace_ms=100.0)
    (cut,) = events(outcome, "world.cut")
    assert [p["drive"] for p in cut["passes"]] == ["cron"]
    assert cut["grace_ms"] == 100.0
    assert outcome.report.cut is not None
    assert "the world was cut 100 ms after its scenario returned, with cron on run" in (
        outcome.report.verdict()
    )


def test_a_hold_until_an_effect_is_released_by_a_service_effect_and_never_by_a_read() -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        async def body() -> str:
            await call_service(ctx, "bank", "look", {})
            await call_service(ctx, "bank", "pay_once", {"order": "o-1"})
            return "paid"

        await ctx.step("pay", body)
        return JobPassResult(done=True)

    hold = HoldLeg(drive="cron", operation="bank.look", nth=1, leg="reply", until="effect")
    outcome = world(handler, plan=FaultPlan((hold,)))
    (release,) = events(outcome, "fault.release")
    assert (release["why"], release["by"], release["by_op"]) == ("effect", "alarm", "bank.pay_once")
    # The alarm's own look ran before its pay, and did not release the hold.
    alarm = [e["op"] for e in events(outcome, "svc.exec") if e["drive"] == "alarm"]
    assert alarm[:2] == ["bank.look", "bank.pay_once"]
    ran = next(e for e in events(outcome, "svc.exec") if e["op"] == "bank.pay_once")
    assert release["t"] == ran["t"]


def test_the_same_seed_gives_the_same_trace_with_services() -> None:
    ranged = Service("bank", operations={"pay": pay}, latency_ms=(1.0, 80.0), refuses=0.2)
    handler, _ = one_call("bank.pay", {"order": "o-1"}, timeout_ms=50.0)
    one = world(handler, services=(ranged,), seed=3)
    again, _ = one_call("bank.pay", {"order": "o-1"}, timeout_ms=50.0)
    assert world(again, services=(ranged,), seed=3).trace.digest() == one.trace.digest()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Service("bank.eu", operations={"pay": pay}),
            r"^Service 'bank.eu': name it with one word of letters, digits, '_' or '-' \(no dot",
        ),
        (
            lambda: Service("bank", operations={}),
            r"^Service\('bank', operations=\{\}\); give a dict of operation names to functions",
        ),
        (
            lambda: Service("bank", operations={"pay": 3}),  # type: ignore[dict-item]
            r"^Service 'bank': operation 'pay' is 3; give a function fn\(state, args\) -> result$",
        ),
        (
            lambda: Service("bank", operations={"pay": pay}, latency_ms=(5.0, 1.0)),
            r"^Service\('bank', latency_ms=\(5.0, 1.0\)\); give a finite number of ms >= 0, or",
        ),
        (
            lambda: Service("bank", operations={"pay": pay}, refuses=1.0),
            r"^Service\('bank', refuses=1.0\); give the share of requests refused, a number >= 0",
        ),
        (
            lambda: WorldSetup(services=[BANK]),  # type: ignore[arg-type]
            r"^WorldSetup\(services=\[Service\(.*\)\]\); give a tuple of Service\(...\) values$",
        ),
        (
            lambda: WorldSetup(services=(BANK, BANK)),
            r"^WorldSetup\(services=...\) declares the service 'bank' twice$",
        ),
        (
            lambda: WorldSetup(grace_ms=-1),
            r"^WorldSetup\(grace_ms=-1\); give how long the world waits for its running passes",
        ),
    ],
)
def test_a_bad_declaration_is_refused_where_it_is_written(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            ("sms", "send", {}, None),
            "no service 'sms' in this world (its services: bank, mailer); declare it in "
            "WorldSetup(services=(Service(...),))",
        ),
        (
            ("bank", "charge", {}, None),
            "service 'bank' has no operation 'charge'; its operations are pay, pay_once, "
            "refund, look, decline",
        ),
        (
            ("bank", "pay", {}, 0),
            "call_service('bank', 'pay').timeout_ms is 0; give a number of ms above 0 and at "
            "most a day, or None",
        ),
        (
            ("bank", "pay", {"when": object}, None),
            "call_service('bank', 'pay').args is not JSON-safe",
        ),
    ],
)
def test_a_bad_call_raises_in_the_handler_with_its_remedy(
    call: tuple[str, str, dict[str, Any], float | None], message: str
) -> None:
    raised: list[BaseException] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        service, operation, args, timeout_ms = call
        try:
            await call_service(ctx, service, operation, args, timeout_ms=timeout_ms)
        except (ValueError, ValidationFailed) as error:
            raised.append(error)
        return JobPassResult(done=True)

    world(handler)
    assert str(raised[0]).startswith(message)


async def test_a_call_without_a_context_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"ctx is None; pass the context your handler was given"):
        await call_service(None, "bank", "pay")  # type: ignore[arg-type]


# -- a state that is no value, a key that is no str -------------------------------------------

#: The end of every refusal of a service's state.
PLAIN = (
    "; the world copies a service's state before each call and compares the copy after it, to "
    "tell an effect from a read: keep plain data in a service's state (dicts, lists, str, "
    "numbers, True, False, None), or values of classes that compare and copy by value "
    "(@attrs.frozen, @dataclass)"
)


class Client:
    """A provider's client, as a state might keep one: equal only to itself."""


def locked() -> dict[str, Any]:
    return {"paid": [], "lock": threading.Lock()}


def with_a_client() -> dict[str, Any]:
    return {"clients": [Client()]}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        # It failed at the first call, with "cannot pickle '_thread.lock' object", naming nothing.
        (
            locked,
            "Service('bank', state=locked): state['lock'] is a _thread.lock, which cannot be "
            "copied (cannot pickle '_thread.lock' object)",
        ),
        # It made every call, reads too, an effect.
        (
            with_a_client,
            "Service('bank', state=with_a_client): state['clients'][0] is a "
            f"{__name__}.Client, which is not equal to a copy of itself (it compares by "
            "identity), so every call, reads too, would be an effect",
        ),
        (
            lambda: {"rate": float("nan")},
            "Service('bank', state=<lambda>): state['rate'] is nan, which is not equal to "
            "itself, so every call would be an effect",
        ),
    ],
)
def test_a_state_that_does_not_copy_or_compare_by_value_is_refused_where_it_is_declared(
    state: Callable[[], Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^Service\('bank', state=") as caught:
        Service("bank", operations={"pay": pay, "look": look}, state=state)
    assert str(caught.value) == message + PLAIN


def test_an_operation_that_puts_a_lock_in_the_state_stops_the_world_naming_the_service() -> None:
    def keep_a_lock(state: dict[str, Any], args: dict[str, Any]) -> None:
        state["lock"] = threading.Lock()

    service = Service("bank", operations={"lock": keep_a_lock, "look": look})

    async def handler(ctx: JobPassContext) -> JobPassResult:
        await call_service(ctx, "bank", "lock", {})
        await call_service(ctx, "bank", "look", {})
        return JobPassResult(done=True)

    with pytest.raises(BaseExceptionGroup) as caught:  # the world's nurseries'
        world(handler, services=(service,))
    leaf: BaseException = caught.value
    while isinstance(leaf, BaseExceptionGroup):
        (leaf,) = leaf.exceptions
    assert isinstance(leaf, ValueError)
    assert str(leaf) == (
        "service 'bank', before its bank.look call: state['lock'] is a _thread.lock, which "
        "cannot be copied (cannot pickle '_thread.lock' object)" + PLAIN
    )


@pytest.mark.parametrize(
    "key",
    [{"b": 1, "a": 2}, 5, None, "", "k" * 256],
    ids=["a dict", "an int", "None", "empty", "too long"],
)
def test_an_idempotency_key_that_is_no_str_is_refused_in_the_handler(key: object) -> None:
    # It used to be taken as written (json.dumps): the same dict in another key order, or 5 for
    # "5", was another key, and a repeat ran again.
    raised: list[BaseException] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        try:
            await call_service(ctx, "bank", "pay_once", {"order": key})
        except ValidationFailed as error:
            raised.append(error)
        return JobPassResult(done=True)

    outcome = world(handler)
    assert str(raised[0]) == (
        f"call_service('bank', 'pay_once').args['order'] is {key!r}, the call's idempotency key "
        "(Operation(..., idempotency_key='order')); a key is a non-empty str of at most 255 "
        "characters, compared as it is written (a dict in another order, 5 and '5' are other "
        "keys): build it from what names the effect, the same in every pass, such as "
        "f'{ctx.run.id}/STEP' (the run's id and the step's name) or the order's id"
    )
    assert events(outcome, "svc.send") == []  # refused before anything left


def test_a_call_key_is_answered_from_its_first_result_by_an_idempotent_operation() -> None:
    answers: list[Any] = []
    keyed = Service("card", operations={"charge": Operation(pay, idempotent=True)})

    async def handler(ctx: JobPassContext) -> JobPassResult:
        for key in ("o-1/charge", "o-1/charge", "o-2/charge"):
            answers.append(
                await ctx.call_service("card", "charge", {"order": key}, idempotency_key=key)
            )
        return JobPassResult(done=True)

    outcome = world(handler, services=(keyed,))
    assert answers == [{"charge": "ch-1"}, {"charge": "ch-1"}, {"charge": "ch-2"}]
    sent = [e.get("key") for e in outcome.trace.of("svc.send")]
    assert sent == ["o-1/charge", "o-1/charge", "o-2/charge"]
    execs = [(e["effect"], e.get("repeat", False)) for e in outcome.trace.of("svc.exec")]
    assert execs == [(True, False), (False, True), (True, False)]


def test_a_decline_is_an_answer_named_after_its_call_and_undoes_what_it_wrote() -> None:
    def charge(state: dict[str, Any], args: dict[str, Any]) -> None:
        state["tried"] = True  # undone: a decline did not run
        raise ServiceDeclined("over the limit", code="card_declined")

    declined: list[ServiceDeclined] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        try:
            await ctx.call_service("card", "charge", {"cents": 90_000}, timeout_ms=1_000)
        except ServiceDeclined as no:
            declined.append(no)
        return JobPassResult(done=True)

    outcome = world(handler, services=(Service("card", operations={"charge": charge}),))
    [no] = declined
    assert (no.code, no.service, no.operation) == ("card_declined", "card", "charge")
    [executed] = outcome.trace.of("svc.exec")
    assert (executed["declined"], executed["effect"]) == (True, False)
    assert [e["op"] for e in outcome.trace.of("svc.reply")] == ["card.charge"]
