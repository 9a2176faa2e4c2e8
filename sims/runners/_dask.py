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
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

# A Dask address: tcp://host:port (the form the issue and the README use), or tls:// or ws://.
_ADDRESS = re.compile(r"(?P<scheme>tcp|tls|ws|wss)://(?P<host>[^\s:/]+)(?::(?P<port>\d+))?")

#: The port ``dask scheduler`` listens on unless told otherwise.
DEFAULT_PORT = 8786

#: How long a sweep waits for the scheduler to answer and for a first worker to join.
CONNECT_TIMEOUT_S = 30

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
    """Open and close one TCP connection to a ``tcp://`` scheduler: a port nobody listens on
    refuses at once, where Dask's client would retry it for the whole connect timeout."""
    match = _ADDRESS.fullmatch(address)
    if match is None or match["scheme"] != "tcp":  # tls:// and ws:// are left to Dask
        return
    port = int(match["port"] or DEFAULT_PORT)
    socket.create_connection((match["host"], port), timeout=CONNECT_TIMEOUT_S).close()


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
