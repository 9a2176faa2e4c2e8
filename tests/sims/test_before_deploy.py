"""``python -m sims before-deploy``: the code about to ship, checked against the runs a real host
left in flight. Release 1 of a shop's order job runs on a real scope host whose card provider is
down, so each order's run waits for its retry with ``reserve`` done and ``charge`` attempted in
its ledger; each release 2 (``tests/sims/worlds/before_deploy.py``) is checked against those
runs, read from the host's SQLite file, its data folder, a saved dump and its recorded history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from driver import JobDriver, ServiceCall, ServiceUnavailable, StartJobRunInput
from scopehost import RecordingJobDriver, open_scope_host, read_scope_file
from sims import DeployInputError, check_deploy
from sims.cli._main import main
from tests.sims.worlds.before_deploy import MODULE, SCOPE, V1

from .test_check import record_in_a_process

ROOT = Path(__file__).parents[2]
WORLDS = "tests/sims/worlds/before_deploy.py"
SHOP = f"{WORLDS}:shop"


class _CardDown:
    """The real host's services: the stock answers; the card provider refuses every charge."""

    def provides(self, service: str) -> bool:
        return service in ("stock", "card")

    async def call(self, call: ServiceCall) -> Any:
        if call.service == "card":
            raise ServiceUnavailable("the card provider is down", service="card")
        return {"reservation": call.args["order"]}


class _Healthy(_CardDown):
    async def call(self, call: ServiceCall) -> Any:
        return {"answered": call.args["order"]}


def serve_v1(
    folder: Path, *, orders: int = 2, refunds: int = 1, card_down: bool = True, record: bool = False
) -> Path:
    """Release 1 on a real host in ``folder`` (its scopes in ``folder/scopes``, its history in
    ``folder/history`` when ``record``): ``orders`` and ``refunds`` started, each run's first pass
    driven once. The file of the shop's scope."""

    async def serve() -> None:
        history = folder / "history" if record else None
        async with open_scope_host(folder / "scopes", record=history) as host:
            kind = RecordingJobDriver if record else JobDriver
            services = _CardDown() if card_down else _Healthy()
            drive = kind(host, name="cron", services=services)
            for definition in V1:
                drive.register(definition)
            for job, count in (("order", orders), ("refund", refunds)):
                for n in range(count):
                    start = StartJobRunInput(
                        module_id=MODULE,
                        job=job,
                        instance=f"{job[0]}{n}",
                        payload={"order": f"{job[0]}{n}"},
                    )
                    await drive.start_job_run(SCOPE, start)
            await drive.run_due_jobs(SCOPE, max_passes=orders + refunds)

    (folder / "scopes").mkdir(parents=True, exist_ok=True)
    trio.run(serve)
    return folder / "scopes" / f"{SCOPE}.sqlite3"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shop's scope file, as release 1 left it with its card provider down."""
    monkeypatch.chdir(ROOT)
    scope_file = serve_v1(tmp_path / "host")
    dump = read_scope_file(scope_file)
    # Every run in flight; each order with 'reserve' done and 'charge' attempted in its ledger.
    assert {(run.job, run.status) for run in dump.runs} == {
        ("order", "running"),
        ("refund", "running"),
    }
    ledger = {(step.step, step.result is not None) for step in dump.steps}
    assert ledger == {("reserve", True), ("charge", False), ("send", False)}
    return scope_file


def before_deploy(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The exit code, stdout with its long lines unwrapped, and stderr."""
    code = main(["before-deploy", *args])
    captured = capsys.readouterr()
    return code, captured.out.replace("\n    ", " "), captured.err


def runs_of(path: Path, job: str) -> list[str]:
    return [run.id for run in read_scope_file(path).runs if run.job == job]


def test_a_renamed_step_is_found_with_the_run_the_step_and_the_remedy(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = before_deploy(
        capsys, f"{WORLDS}:V2_RENAMED", "--runs", str(host), "--world", SHOP
    )
    assert (code, err) == (1, "")
    for run in runs_of(host, "order"):
        block = f"cannot go on: scope shop, run {run} (job shop/order, instance '"
        assert block in out
    assert out.count("cannot go on: ") == 2
    assert (
        "), step 'reserve'\n  the run's ledger holds 'reserve' (done by the old code: whatever "
        "it does happened), and the new code's passes never call it (they called 'reserve-stock', "
        "'charge'; 'reserve-stock', which the ledger does not hold, comes before steps it holds): "
        "what it did would be done again, under a new name, or by other work the new code does "
        "here\n  remedy: keep the old step name; if the new code walks elsewhere, read the run's "
        "cursor and payload as the old code wrote them; or version the job (register the new "
        "handler under a new job name and keep the old handler until the old runs have ended)\n"
    ) in out
    assert out.rstrip().endswith(
        "3 runs in flight; 0 can go on under the new code; 2 cannot; 1 not checked (their jobs "
        "are not in the new code)"
    )


def test_the_fixed_release_keeps_the_old_names_and_every_run_goes_on(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = before_deploy(capsys, f"{WORLDS}:V2_FIXED", "--runs", str(host), "--world", SHOP)
    assert code == 0, out
    assert "cannot go on" not in out
    assert out.rstrip().endswith(
        "3 runs in flight; 2 can go on under the new code; 0 cannot; 1 not checked (their jobs "
        "are not in the new code)"
    )


def test_a_release_that_raises_on_the_old_payload_is_found(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = before_deploy(
        capsys, f"{WORLDS}:V2_RAISES", "--runs", str(host), "--world", SHOP
    )
    assert code == 1, out
    assert out.count("cannot go on: ") == 2  # once per order, though its retry raised too
    assert (
        "), before its first step\n  the new code raised KeyError: 'currency' at before_deploy.py:"
    ) in out
    assert (
        "in order_v2_raises over the run as the old code wrote it (its payload, its cursor or "
        "the results its ledger holds), so every pass of the run fails\n  remedy: read the old "
        "shape too, and keep writing it while the old code still serves (a rolling deploy runs "
        "both), or version the job"
    ) in out


def test_a_new_step_before_the_steps_of_the_ledger_is_found(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = before_deploy(
        capsys, f"{WORLDS}:V2_NEW_FIRST", "--runs", str(host), "--world", SHOP
    )
    assert code == 1, out
    assert out.count("cannot go on: ") == 2
    assert (
        "), step 'check-fraud'\n  the new code calls 'check-fraud', a step the run's ledger does "
        "not hold, before 'reserve' (done by the old code: whatever it does happened) and 'charge' "
        "(attempted by the old code and failed: its effect may have happened), which it holds: "
        "on this run 'check-fraud' runs after the work it is meant to precede\n  remedy: call new "
        "steps after the ones the old code recorded, or version the job"
    ) in out


def test_a_run_of_a_job_the_new_code_does_not_define_is_listed_as_not_checked(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (refund,) = runs_of(host, "refund")
    code, out, _ = before_deploy(capsys, f"{WORLDS}:V2_FIXED", "--runs", str(host), "--world", SHOP)
    assert code == 0, out
    assert (
        f"\nnot checked: 1 run of jobs the new code does not define: run {refund} (job "
        "shop/refund, instance 'r0') in scope shop\n"
    ) in out


def test_a_job_that_calls_no_service_is_checked_without_a_world(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = before_deploy(capsys, f"{WORLDS}:REFUND_V2", "--runs", str(host))
    assert code == 0, out
    assert out.rstrip().endswith(
        "3 runs in flight; 1 can go on under the new code; 0 cannot; 2 not checked (their jobs "
        "are not in the new code)"
    )


def test_a_pass_that_never_ends_is_cut_and_its_run_not_judged(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (refund,) = runs_of(host, "refund")
    code, out, _ = before_deploy(capsys, f"{WORLDS}:REFUND_HANGS", "--runs", str(host))
    assert code == 1, out
    assert (
        f"\nnot judged: scope shop, run {refund} (job shop/refund, instance 'r0')\n  the new "
        "code's pass over it did not end within 60 minutes of the check's world, and was cut: "
        "which steps the new code calls on it is not known\n"
    ) in out
    assert "; 0 can go on under the new code; 0 cannot; 1 not judged (above); 2 not checked" in out


def test_new_code_in_a_file_of_its_own_is_loaded_as_a_world_file_is(
    host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "release.py").write_text(
        "from driver import JobDefinition, JobPassResult\n"
        "from neighbour import STEP\n"  # its folder is on the path, as a world file's is
        "async def refund(ctx):\n"
        "    await ctx.step(STEP, lambda: 'sent')\n"
        "    return JobPassResult(done=True)\n"
        "RELEASE = JobDefinition('shop', 'refund', refund)\n",
        encoding="utf-8",
    )
    (tmp_path / "neighbour.py").write_text("STEP = 'post'\n", encoding="utf-8")
    code, out, _ = before_deploy(capsys, f"{tmp_path / 'release.py'}:RELEASE", "--runs", str(host))
    assert code == 1, out
    assert (
        "step 'send'\n  the run's ledger holds 'send' (attempted by the old code and failed: "
        in out
    )
    assert "(they called 'post'): what it did would be done again, under a new name" in out


def test_nothing_in_flight_is_a_clean_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    ended = serve_v1(tmp_path, refunds=0, card_down=False)
    assert {run.status for run in read_scope_file(ended).runs} == {"done"}
    code, out, _ = before_deploy(
        capsys, f"{WORLDS}:V2_RENAMED", "--runs", str(ended), "--world", SHOP
    )
    assert code == 0, out
    assert "no run is in flight" in out
    assert out.rstrip().endswith("0 runs in flight; 0 can go on under the new code; 0 cannot")


def test_a_data_folder_and_a_saved_dump_read_as_the_scope_file_does(
    host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "shop.json"
    saved.write_text(read_scope_file(host).to_json(), encoding="utf-8")
    outs = []
    for source in (host, host.parents[1], saved):
        code, out, _ = before_deploy(
            capsys, f"{WORLDS}:V2_RENAMED", "--runs", str(source), "--world", SHOP
        )
        assert code == 1, out
        outs.append(out.split("\n", 1)[1])  # past the first line, which names the source
    assert outs[0] == outs[1] == outs[2]


def test_the_python_api_gives_the_verdict_as_values(host: Path) -> None:
    from tests.sims.worlds.before_deploy import V2_FIXED, V2_NEW_FIRST, V2_RAISES, V2_RENAMED

    verdict = check_deploy(V2_RENAMED, [host], world=SHOP)
    assert not verdict.ok
    assert [(f.rule, f.step) for f in verdict.findings] == [
        ("step-not-called", "step 'reserve'"),
        ("step-not-called", "step 'reserve'"),
    ]
    # One pass each: it returned, so no retry.
    assert {run.called for run in verdict.runs} == {(("reserve-stock", "charge"),)}
    dump = read_scope_file(host)
    raised = check_deploy(V2_RAISES, [dump], world=SHOP)
    # The next pass raised, and so did its retry; no third pass runs.
    assert {run.called for run in raised.runs} == {((), ())}
    assert {f.rule for f in raised.findings} == {"raises"}
    first = check_deploy(V2_NEW_FIRST, [dump], world=SHOP)
    assert {(f.rule, f.step) for f in first.findings} == {("new-step-first", "step 'check-fraud'")}
    fixed = check_deploy(V2_FIXED, [dump], world=SHOP)
    assert fixed.ok
    assert {run.called for run in fixed.runs} == {(("reserve", "charge", "receipt"),)}


def test_a_recorded_history_reads_as_the_host_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    scope_file = serve_v1(tmp_path, record=True)
    by_file = before_deploy(
        capsys, f"{WORLDS}:V2_RENAMED", "--runs", str(scope_file), "--world", SHOP
    )
    by_history = before_deploy(
        capsys, f"{WORLDS}:V2_RENAMED", "--runs", str(tmp_path / "history"), "--world", SHOP
    )
    assert by_history[0] == by_file[0] == 1
    assert by_history[1].split("\n", 1)[1] == by_file[1].split("\n", 1)[1]


def test_a_history_of_a_killed_process_is_refused_naming_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Killed the moment its store committed a step: that write's outcome was never recorded.
    assert record_in_a_process(tmp_path, database="DiesAfterStepOne", runs="1") == 9
    monkeypatch.chdir(ROOT)
    history = tmp_path / "history"
    code, out, err = before_deploy(capsys, f"{WORLDS}:REFUND_V2", "--runs", str(history))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: --runs {history}: record_step sent by process ")
    assert err.endswith(
        "has no recorded outcome (the process ended between the store's commit and its record, "
        "or before the store ran it), so the history cannot say what the run's rows hold; give "
        "the scope's file instead (DATA/scopes/SCOPE.sqlite3, read while no host has it open) or "
        "a dump of it\n"
    )
    # What it names instead: the scope's file holds what the store committed. Its run's lease
    # is live (the pass was killed), so the new code's pass comes once it runs out.
    scope_file = str(tmp_path / "scopes" / "s.sqlite3")
    code, out, _ = before_deploy(capsys, f"{WORLDS}:KILLED_SAME", "--runs", scope_file)
    assert code == 0, out
    assert out.rstrip().endswith("1 run in flight; 1 can go on under the new code; 0 cannot")
    code, out, _ = before_deploy(capsys, f"{WORLDS}:KILLED_RENAMED", "--runs", scope_file)
    assert code == 1, out
    assert "step 'one'\n  the run's ledger holds 'one' (done by the old code: whatever" in out


# -- input that cannot be used: exit 2, one line naming the value and the remedy ---------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["NOPE", "--runs", "{host}"],
            "error: NEW_JOBS 'NOPE': NEW_JOBS is FILE.py:NAME, NAME a driver.JobDefinition or a "
            "tuple of them in that file: the code about to ship",
        ),
        (
            ["tests/sims/worlds/none.py:V2", "--runs", "{host}"],
            "error: NEW_JOBS tests/sims/worlds/none.py:V2: tests/sims/worlds/none.py is no file; "
            "name the Python file that defines the code about to ship (FILE.py:NAME)",
        ),
        (
            [f"{WORLDS}:NOT_JOBS", "--runs", "{host}"],
            f"error: NEW_JOBS {WORLDS}:NOT_JOBS is ('order', 'refund'), not a "
            "driver.JobDefinition or a tuple of them; name the job definitions about to ship",
        ),
        (
            [f"{WORLDS}:V3", "--runs", "{host}"],
            f"error: NEW_JOBS {WORLDS}:V3: {WORLDS} defines no V3; its job definitions are: "
            "ORDER_V1, REFUND_V1, V1, V2_FIXED, V2_RENAMED, V2_RAISES, V2_NEW_FIRST, REFUND_V2",
        ),
        (
            [f"{WORLDS}:V2_FIXED", "--runs", "{host}"],
            "error: the new code calls services (job shop/order calls stock, card) and no world "
            "declares them; give --world FILE.py:NAME, a scenario whose WorldSetup(services=...) "
            "declares them",
        ),
        (
            [f"{WORLDS}:V2_FIXED", "--runs", "{host}", "--world", f"{WORLDS}:no-services"],
            f"error: --world {WORLDS}:no-services does not declare card, stock, which the new "
            "code calls (job shop/order calls stock, card); declare them in its "
            "WorldSetup(services=(Service(...),)), or name a scenario whose setup does",
        ),
        (
            [f"{WORLDS}:REFUND_V2", "--runs", "{tmp}/missing"],
            "error: --runs {tmp}/missing: no such file or folder; give a scope's saved dump (the "
            "JSON JobRunDump.to_json writes), a scope's .sqlite3 file, a host's data folder (its "
            "scopes/*.sqlite3), or a recorded history (history-*.jsonl, or its folder)",
        ),
        (
            [f"{WORLDS}:REFUND_V2", "--runs", "{tmp}/notes.txt"],
            "error: --runs {tmp}/notes.txt is not a scope's saved dump (dump is not JSON "
            "(Expecting value: line 1 column 1 (char 0)); pass the text JobRunDump.to_json "
            "wrote); give a scope's saved dump",
        ),
        (
            [f"{WORLDS}:REFUND_V2", "--runs", "{tmp}/empty"],
            "error: --runs {tmp}/empty: the folder holds no scope's file (scopes/*.sqlite3 or "
            "*.sqlite3) and no history-*.jsonl; give a scope's saved dump",
        ),
        (
            [f"{WORLDS}:REFUND_V2", "--runs", "{tmp}/other.sqlite3"],
            "error: --runs: '{tmp}/other.sqlite3' does not read as a scope's file (no such "
            "table: _substrat_job_runs) (if it is a copy, copy its other.sqlite3-wal beside it "
            "too); give a scope's .sqlite3 file from a host's folder",
        ),
        (
            [f"{WORLDS}:REFUND_V2", "--runs", "{host}", "--runs", "{tmp}/copy.json"],
            "error: --runs {host} and --runs {tmp}/copy.json both hold scope shop; give each "
            "scope once (the one that holds its latest rows)",
        ),
    ],
    ids=[
        "not-file-name",
        "no-file",
        "not-definitions",
        "no-such-name",
        "services-without-world",
        "world-lacks-services",
        "missing-source",
        "not-a-dump",
        "empty-folder",
        "not-a-scope-file",
        "scope-twice",
    ],
)
def test_input_that_cannot_be_used_is_refused_in_one_line(
    host: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    import sqlite3

    (tmp_path / "notes.txt").write_text("not a dump\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    other = sqlite3.connect(tmp_path / "other.sqlite3")
    other.execute("CREATE TABLE charges (id INTEGER)")
    other.commit()
    other.close()
    (tmp_path / "copy.json").write_text(read_scope_file(host).to_json(), encoding="utf-8")
    given = [arg.format(host=host, tmp=tmp_path) for arg in args]
    code, out, err = before_deploy(capsys, *given)
    assert (code, out) == (2, "")
    expected = message.format(host=host, tmp=tmp_path)
    assert err.startswith(expected), err
    assert err.count("\n") == 1


def test_a_job_value_that_is_not_a_definition_is_refused_by_the_api(host: Path) -> None:
    with pytest.raises(
        DeployInputError,
        match=r"^jobs is \['order'\], not a driver\.JobDefinition or a tuple of them; ",
    ):
        check_deploy(["order"], [host])  # type: ignore[list-item]
