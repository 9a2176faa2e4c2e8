"""``python -m sims.conformance.write_reference PAGE``: rewrite PAGE's generated part (the SQL and
the refusals, see ``_reference_doc``) from the source."""

from __future__ import annotations

import sys
from pathlib import Path

from ._reference_doc import rewrite


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(
            "usage: python -m sims.conformance.write_reference docs/conformance.md", file=sys.stderr
        )
        return 2
    page = Path(argv[0])
    page.write_text(rewrite(page.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
