"""Sweeps on a Dask distributed cluster: the same seeds, the same summaries, more machines.

A sweep is embarrassingly parallel, so a cluster needs nothing from us but a place to run the
function a sweep's worker processes run (``summarise_in_worker``). Seeds travel in chunks, so that a
task carries a few worlds rather than the scheduler's overhead, and summaries come back in whatever
order workers finish; the caller sorts them, which is why the report cannot tell a cluster from a
pool.

Two things keep a cluster's verdicts equal to a local sweep's:

- Every world is one ``trio.run`` whose scheduler is seeded through Trio's module-level random
  source. A Dask worker runs tasks in threads, and two worlds in two threads would share that
  source. ``summarise_chunk`` therefore runs one world at a time per worker process, whatever
  ``--nthreads`` the worker was started with.
- Workers import this package: every machine of the cluster needs the project installed
  (``pip install -e '.[dask]'``), at the same version as the machine that submits the sweep.

``distributed`` is an optional extra: it is imported only when a sweep names a scheduler.

Before Dask's client is given a ``tcp://`` address, this module knocks on it itself
(:func:`_knock`), within :data:`ANSWER_TIMEOUT_S`: Dask's client reads the scheduler's first
message with no deadline, so a server that accepts and never speaks (a firewall's proxy, a port
forwarded to nothing, the dashboard's HTTP port) would hang it for ever, and one that speaks
another protocol makes it allocate what the first 8 bytes say the message holds (a
``MemoryError`` or an ``OverflowError``). A scheduler speaks first: the length of its handshake, 8
bytes, then the handshake. The knock reads both, and refuses an address that does not send them.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

# A Dask address: tcp://host:port (the form the issue and the README use), or tls:// or ws://.
_ADDRESS = re.compile(r"(?P<scheme>tcp|tls|ws|wss)://(?P<host>[^\s:/]+)(?::(?P<port>\d+))?")

#: The port ``dask scheduler`` listens on unless told otherwise.
DEFAULT_PORT = 8786

#: How long a sweep waits for the scheduler to answer and for a first worker to join.
CONNECT_TIMEOUT_S = 30

#: How long the knock waits for a ``tcp://`` scheduler to accept a connection and send its
#: handshake (a scheduler sends it at once; this is for a slow network).
ANSWER_TIMEOUT_S = 5.0

#: The longest handshake the knock reads: a scheduler's is some 60 bytes; another protocol's
#: first 8 bytes, read as a length, are usually far past this.
_MOST_HANDSHAKE = 1 << 20

_ONE_WORLD_AT_A_TIME = threading.Lock()

Job = TypeVar("Job")
Summary = TypeVar("Summary")


class DaskUnavailable(ValueError):
    """The sweep named a scheduler but cannot use it; the message says why and what to do."""


def check_scheduler_address(address: str) -> str:
    if not _ADDRESS.fullmatch(address):
        raise DaskUnavailable(
            f"scheduler {address!r} is not a Dask address; write it as tcp://HOST:PORT "
            "(the address `dask scheduler` prints)"
        )
    return address


def summarise_chunk(summarise: Callable[[Job], Summary], jobs: Sequence[Job]) -> list[Summary]:
    """Run ``jobs`` one after another on a Dask worker; the worlds never overlap in a process.

    ``summarise`` returns a world that raised as a value (``sims.runners._sweep.WorldRaised``),
    which the sweep raises when it collects this chunk, as it does for its local worker
    processes."""
    with _ONE_WORLD_AT_A_TIME:
        return [summarise(job) for job in jobs]


def run_on_cluster(
    address: str,
    summarise: Callable[[Job], Summary],
    work: Sequence[Job],
    *,
    collect: Callable[[Iterator[Summary]], None],
) -> None:
    """Run ``summarise`` over ``work`` on the cluster at ``address``; hand summaries to
    ``collect`` as chunks finish."""
    with connect_to_cluster(address) as (client, threads):
        distributed = _import_distributed()
        futures = [
            client.submit(summarise_chunk, summarise, chunk, pure=False)
            for chunk in _chunks(work, size=max(1, len(work) // (max(1, threads) * 8)))
        ]
        for future in distributed.as_completed(futures):
            collect(iter(future.result()))


@contextmanager
def connect_to_cluster(address: str) -> Iterator[tuple[Any, int]]:
    """A client of the cluster at ``address`` that has a worker, and how many threads its
    workers have in all; every way of failing to get one is a :class:`DaskUnavailable`."""
    check_scheduler_address(address)
    distributed = _import_distributed()
    try:
        _knock(address)
        client = distributed.Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except OSError as error:
        raise DaskUnavailable(
            f"cannot reach the Dask scheduler at {address}: {error}; start one with "
            "`dask scheduler` and workers with `dask worker ADDRESS`"
        ) from None
    except (MemoryError, OverflowError):  # the knock's net missed it (tls://, ws://)
        raise DaskUnavailable(_not_dask(address, "answered, but not as a Dask scheduler")) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise DaskUnavailable(
                f"the Dask scheduler at {address} has no workers after {CONNECT_TIMEOUT_S} s; "
                "start some with `dask worker ADDRESS`"
            ) from None
        threads = sum(info["nthreads"] for info in client.scheduler_info()["workers"].values())
        yield client, threads


def _knock(address: str) -> None:
    """Connect to a ``tcp://`` scheduler and read its handshake, within :data:`ANSWER_TIMEOUT_S`;
    a port nobody listens on refuses at once (Dask's client would retry it for the whole connect
    timeout), and a server that is not a scheduler is told as one (see the module's docstring)."""
    match = _ADDRESS.fullmatch(address)
    if match is None or match["scheme"] != "tcp":  # tls:// and ws:// are left to Dask
        return
    port = int(match["port"] or DEFAULT_PORT)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    try:
        knock = socket.create_connection((match["host"], port), timeout=ANSWER_TIMEOUT_S)
    except TimeoutError:
        raise DaskUnavailable(
            f"cannot reach the Dask scheduler at {address}: no connection within "
            f"{ANSWER_TIMEOUT_S:g} s; check the address, and that a firewall lets it through"
        ) from None
    with knock:
        first = _read(knock, 8, deadline, address)
        (length,) = struct.unpack("Q", first)
        if not 0 < length <= _MOST_HANDSHAKE:
            said = f"it began {first!r}, not with a handshake's length"
            raise DaskUnavailable(
                _not_dask(address, f"answered, but not as a Dask scheduler ({said})")
            )
        _read(knock, length, deadline, address)


def _read(knock: socket.socket, size: int, deadline: float, address: str) -> bytes:
    """``size`` bytes of the handshake, before ``deadline``."""
    got = b""
    while len(got) < size:
        knock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            more = knock.recv(size - len(got))
        except TimeoutError:
            raise DaskUnavailable(
                _not_dask(
                    address,
                    f"accepted the connection but sent no Dask handshake within "
                    f"{ANSWER_TIMEOUT_S:g} s (a scheduler sends one at once)",
                )
            ) from None
        if not more:
            raise DaskUnavailable(
                _not_dask(address, "closed the connection before it sent a Dask handshake")
            )
        got += more
    return got


def _not_dask(address: str, what: str) -> str:
    return (
        f"the server at {address} {what}; give the address `dask scheduler` prints "
        f"(port {DEFAULT_PORT} unless told otherwise; {DEFAULT_PORT + 1} is its dashboard's, "
        "which speaks HTTP)"
    )


def _chunks(work: Sequence[Job], *, size: int) -> Iterator[Sequence[Job]]:
    for start in range(0, len(work), size):
        yield work[start : start + size]


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise DaskUnavailable(
            "a sweep on a Dask cluster needs dask.distributed; install it with "
            "`pip install -e '.[dask]'`"
        ) from None
    return distributed
