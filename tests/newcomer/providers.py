"""A simple local outside world for the invoice job: one HTTP server on 127.0.0.1 speaking the
contract ``serviceclients.HttpServices`` speaks (docs/simulating-your-jobs.md): ``POST
{base}/{OPERATION}``, JSON body, ``Idempotency-Key`` header, 2xx JSON answer, 503 for "down".

Services (base URL ``http://127.0.0.1:PORT/SERVICE``): ``mail/send``, ``archive/store``,
``numbers/allocate``. State and remembered answers are kept in ``services.sqlite3`` in the data
folder, so they outlive a killed process.

Faults: ``archive_down`` answers 503 to every archive call (runs stay in flight with ``render``
and ``email`` in their ledger); ``drop_mail`` drops the answer of the first N mails after they
were sent (the client gets ``ServiceTimedOut``); ``kill_after_mail`` SIGKILLs the whole process
right after the Nth mail was sent and before it is answered (an incident).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS answered (key TEXT PRIMARY KEY, body TEXT);
CREATE TABLE IF NOT EXISTS mails (id INTEGER PRIMARY KEY, invoice TEXT, sent_to TEXT, subject TEXT,
  mail_key TEXT);
CREATE TABLE IF NOT EXISTS archive (invoice TEXT PRIMARY KEY, total INTEGER);
CREATE TABLE IF NOT EXISTS numbers (number INTEGER PRIMARY KEY, invoice TEXT);
"""


class Services(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        folder: Path,
        *,
        archive_down: bool = False,
        drop_mail: int = 0,
        kill_after_mail: int = 0,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(
            folder / "services.sqlite3", check_same_thread=False, isolation_level=None
        )
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self.archive_down = archive_down
        self.drop_mail = drop_mail
        self.kill_after_mail = kill_after_mail
        self.mails_this_start = 0

    def endpoints(self) -> dict[str, str]:
        base = f"http://127.0.0.1:{self.server_address[1]}"
        return {name: f"{base}/{name}" for name in ("mail", "archive", "numbers")}

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.db.close()

    def work(self, path: str, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if path == "mail/send":
            cur = self.db.execute(
                "INSERT INTO mails (invoice, sent_to, subject, mail_key) VALUES (?, ?, ?, ?)",
                (args["invoice"], args["to"], args["subject"], key),
            )
            return {"message": cur.lastrowid}
        if path == "archive/store":
            self.db.execute(
                "INSERT OR REPLACE INTO archive VALUES (?, ?)", (args["invoice"], args["total"])
            )
            return {"archived": args["invoice"]}
        if path == "numbers/allocate":
            cur = self.db.execute("INSERT INTO numbers (invoice) VALUES (?)", (args["invoice"],))
            return {"number": cur.lastrowid}
        raise KeyError(path)

    def answer(self, path: str, key: str | None, args: dict[str, Any]) -> str:
        with self.lock:
            if key is not None:
                found = self.db.execute(
                    "SELECT body FROM answered WHERE key = ?", (f"{path}:{key}",)
                ).fetchone()
                if found is not None:
                    return str(found[0])
            self.db.execute("BEGIN IMMEDIATE")
            try:
                body = json.dumps(self.work(path, args, key))
                if key is not None:
                    self.db.execute("INSERT INTO answered VALUES (?, ?)", (f"{path}:{key}", body))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return body

    # -- reading the records (for a summary, and for an incident world) ----------------------

    def mails_by_invoice(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT invoice, count(*) FROM mails GROUP BY invoice")
            return {str(i): int(n) for i, n in rows}


def read_records(folder: Path) -> dict[str, Any]:
    """The services' records as a killed process left them, read-only."""
    conn = sqlite3.connect(f"{(folder / 'services.sqlite3').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {
            "mails": conn.execute(
                "SELECT invoice, sent_to, subject, mail_key FROM mails ORDER BY id"
            ).fetchall(),
            "archive": conn.execute("SELECT invoice, total FROM archive").fetchall(),
            "numbers": conn.execute("SELECT number, invoice FROM numbers ORDER BY 1").fetchall(),
            "answered": {
                str(k): json.loads(b) for k, b in conn.execute("SELECT key, body FROM answered")
            },
        }
    finally:
        conn.close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Services

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        args = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.strip("/")
        if path.startswith("archive/") and self.server.archive_down:
            self._send(503, b'{"code": "down"}')
            return
        body = self.server.answer(path, self.headers.get("Idempotency-Key"), args)
        if path == "mail/send":
            with self.server.lock:
                self.server.mails_this_start += 1
                nth = self.server.mails_this_start
            if nth == self.server.kill_after_mail:
                os.kill(os.getpid(), signal.SIGKILL)  # the incident: sent, never answered
            if nth <= self.server.drop_mail:
                self.close_connection = True
                self.connection.close()  # the work is done; the answer never leaves
                return
        self._send(200, body.encode())

    def _send(self, status: int, content: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass
