"""The shop's outside world for real: a card provider and a mailer, HTTP servers on localhost.

Stand-ins for the systems a real shop calls, with the behaviour of real ones that matters here:

- ``POST /charge`` charges an order's card. A request with an ``Idempotency-Key`` that the
  provider has answered before gets that answer again, without charging (keys are kept in its
  database, so they outlive a restart of the provider). An amount over the card's limit is
  declined: ``402 {"code": "card_declined"}``.
- ``POST /send`` sends a mail, remembered by its key the same way.

Each keeps its state in a SQLite file of its own in the data folder, so that the summary counts
what was charged and sent across every start of ``serve``. Faults, as a provider has them: with
``drop_rate`` a request is charged (or sent) and then its connection dropped without an answer;
with ``late_ms`` the answer comes that much later, after the work was done. Both are drawn from a
seeded random source, so a given seed drops the same requests. A provider ``down`` refuses every
request unrun (``503``), as during an outage.
"""

from __future__ import annotations

import http.server
import json
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Final

#: The card's limit: an order above it is declined.
LIMIT_CENTS: Final = 50_000


class Provider(http.server.ThreadingHTTPServer):
    """One service on 127.0.0.1, its state in ``database``, its work done by ``operations``."""

    daemon_threads = True

    def __init__(
        self,
        database: Path,
        schema: str,
        *,
        drop_rate: float = 0.0,
        late_ms: float = 0.0,
        seed: int = 0,
        down: bool = False,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(database, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(
            f"{schema} CREATE TABLE IF NOT EXISTS answered "
            "(key TEXT PRIMARY KEY, status INTEGER, body TEXT)"
        )
        self.drop_rate = drop_rate
        self.late_ms = late_ms
        self.random = random.Random(seed)
        self.faults = {"dropped": 0, "late": 0, "refused": 0}
        #: Down: every request is refused unrun (503), as during an outage.
        self.down = down

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.db.close()

    def work(self, operation: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def answer(self, operation: str, key: str | None, args: dict[str, Any]) -> tuple[int, str]:
        """Do the work once per key, in one transaction with the key's answer."""
        with self.lock:
            if key is not None:
                found = self.db.execute(
                    "SELECT status, body FROM answered WHERE key = ?", (f"{operation}:{key}",)
                ).fetchone()
                if found is not None:
                    return int(found[0]), str(found[1])
            self.db.execute("BEGIN IMMEDIATE")
            try:
                status, body = self.work(operation, args)
                text = json.dumps(body)
                if key is not None:
                    self.db.execute(
                        "INSERT INTO answered VALUES (?, ?, ?)",
                        (f"{operation}:{key}", status, text),
                    )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return status, text

    def fault(self) -> str | None:
        """What goes wrong with this answer, drawn from the seed: dropped, late, or nothing."""
        with self.lock:
            drawn = self.random.random()
            if drawn < self.drop_rate:
                self.faults["dropped"] += 1
                return "drop"
            if self.late_ms and drawn < self.drop_rate * 2:
                self.faults["late"] += 1
                return "late"
        return None


class CardProvider(Provider):
    def __init__(self, folder: Path, **faults: Any) -> None:
        super().__init__(
            folder / "card.sqlite3",
            "CREATE TABLE IF NOT EXISTS charges "
            "(charge INTEGER PRIMARY KEY, orderid TEXT, customer TEXT, cents INTEGER);",
            **faults,
        )

    def work(self, operation: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if operation != "charge":
            return 404, {"code": "no_such_operation"}
        if int(args["cents"]) > LIMIT_CENTS:
            return 402, {"code": "card_declined"}
        cursor = self.db.execute(
            "INSERT INTO charges (orderid, customer, cents) VALUES (?, ?, ?)",
            (args["order"], args["customer"], int(args["cents"])),
        )
        return 200, {"charge": f"ch-{cursor.lastrowid}"}

    def charges_by_order(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT orderid, count(*) FROM charges GROUP BY orderid")
            return {str(order): int(count) for order, count in rows}


class Mailer(Provider):
    def __init__(self, folder: Path, **faults: Any) -> None:
        super().__init__(
            folder / "mail.sqlite3",
            "CREATE TABLE IF NOT EXISTS mails "
            "(mail INTEGER PRIMARY KEY, sent_to TEXT, subject TEXT);",
            **faults,
        )

    def work(self, operation: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if operation != "send":
            return 404, {"code": "no_such_operation"}
        cursor = self.db.execute(
            "INSERT INTO mails (sent_to, subject) VALUES (?, ?)", (args["to"], args["subject"])
        )
        return 200, {"message": cursor.lastrowid}

    def mails(self) -> int:
        with self.lock:
            return int(self.db.execute("SELECT count(*) FROM mails").fetchone()[0])


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Provider

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        args = json.loads(self.rfile.read(length) or b"{}")
        if self.server.down:
            with self.server.lock:
                self.server.faults["refused"] += 1
            self._send(503, json.dumps({"code": "down"}).encode())
            return
        status, body = self.server.answer(
            self.path.strip("/"), self.headers.get("Idempotency-Key"), args
        )
        fault = self.server.fault()
        if fault == "drop":
            # The work is done; the answer never leaves.
            self.close_connection = True
            self.connection.close()
            return
        if fault == "late":
            time.sleep(self.server.late_ms / 1000.0)
        self._send(status, body.encode())

    def _send(self, status: int, content: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a late answer to a client that gave up: nobody hears it, as in life

    def log_message(self, format: str, *args: Any) -> None:
        pass
