"""What SQLite itself writes about a database in WAL mode, read from its files: the database
header, the log's header and frames, and the log's index (the ``-shm`` file).

The watch (``_watch``) judges a file by these records rather than by times that SQLite or an
operator moves. Their layout is SQLite's documented file format
(https://www.sqlite.org/fileformat2.html and https://www.sqlite.org/walformat.html):

- the database header is the file's first 100 bytes; it holds the file change counter, the page
  count and the schema cookie, among others;
- the log starts with a 32-byte header whose two salts change each time the log starts over; each
  frame carries a 24-byte header with the salts and a running checksum, then one page;
- the index starts with two copies of a 48-byte header (the salts of the current log, the last
  valid frame and that frame's checksum), then the checkpoint record: how many frames were copied
  into the database file (``nBackfill``) and how many a checkpoint set out to copy
  (``nBackfillAttempted``). Its integers are in the machine's byte order; the log's are big-endian.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

#: The database header's length.
DATABASE_HEADER: Final = 100
#: The log's header, and each frame's.
LOG_HEADER: Final = 32
FRAME_HEADER: Final = 24
#: The index's two header copies and the checkpoint record after them.
INDEX_HEADER: Final = 136
_COPY = 48


@attrs.frozen
class IndexHeader:
    """The index's description of the log, and of the checkpoints run on it."""

    salts: bytes
    page_size: int
    max_frame: int
    frame_checksum: tuple[int, int]
    backfilled: int
    backfill_attempted: int

    @property
    def checkpoint(self) -> tuple[bytes, int, int]:
        """What moves each time anyone checkpoints (copies frames into the database file), or
        starts the log over: the log's salts and the two backfill counts. None of it moves
        otherwise, and none of it comes back to an earlier value within one log."""
        return self.salts, self.backfilled, self.backfill_attempted

    def frame_offset(self, frame: int) -> int:
        """Where frame ``frame`` (counted from 1) starts in the log."""
        return LOG_HEADER + (frame - 1) * (FRAME_HEADER + self.page_size)

    @classmethod
    def parse(cls, data: bytes) -> IndexHeader | None:
        """The header, or None when the index is too short or its two copies differ (written
        while it was read: read again)."""
        if len(data) < INDEX_HEADER or data[:_COPY] != data[_COPY : 2 * _COPY]:
            return None
        size = struct.unpack_from("=H", data, 14)[0]
        max_frame = struct.unpack_from("=I", data, 16)[0]
        checksum = struct.unpack_from("=II", data, 24)
        backfilled = struct.unpack_from("=I", data, 96)[0]
        attempted = struct.unpack_from("=I", data, 128)[0]
        return cls(
            salts=bytes(data[32:40]),
            # A page of 65,536 bytes does not fit the field's 16 bits: SQLite writes it as 1.
            page_size=65536 if size == 1 else size,
            max_frame=max_frame,
            frame_checksum=(checksum[0], checksum[1]),
            backfilled=backfilled,
            backfill_attempted=attempted,
        )


def log_salts(header: bytes) -> bytes | None:
    """The salts of a log's header, or None when the header is not whole."""
    return header[16:24] if len(header) >= LOG_HEADER else None


def frame_checksum(header: bytes) -> tuple[int, int] | None:
    """The running checksum a frame's header carries, or None when the header is not whole."""
    if len(header) < FRAME_HEADER:
        return None
    first, second = struct.unpack_from(">II", header, 16)
    return first, second
