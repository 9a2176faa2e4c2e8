"""A drive's options, checked when the drive is built.

A drive holds on to what it is given and first uses most of it in a later call, so a wrong value
would fail there as a bare AttributeError or TypeError ("'NoneType' object has no attribute
'clock'"), far from the line that passed it. Each is refused here instead, by name.
"""

from __future__ import annotations

from ._errors import FieldError, ValidationFailed
from ._start import name_errors


def _lacks(value: object, *methods: str) -> list[str]:
    return [method for method in methods if not callable(getattr(value, method, None))]


def host_errors(host: object, *, clock: bool, rng: bool, monotonic: bool) -> list[FieldError]:
    """Why ``host`` cannot carry a drive: the members a drive calls (``clock``, ``rng`` and
    ``monotonic_ms`` only when the drive was not given its own) that it lacks."""
    missing = _lacks(host, "stub", "door", "check_link")
    if monotonic:
        missing += _lacks(host, "monotonic_ms")
    if clock and _lacks(getattr(host, "clock", None), "now"):
        missing.append("clock.now")
    if rng and _lacks(getattr(host, "rng", None), "random", "getrandbits"):
        missing.append("rng (random and getrandbits)")
    if not missing:
        return []
    return [
        FieldError(
            "host",
            f"is {host!r}, which lacks {', '.join(missing)}; pass the scope host the drive works "
            "on (what scopehost.open_scope_host yields)",
        )
    ]


def _function_errors(value: object, path: str, remedy: str) -> list[FieldError]:
    if value is None or callable(value):
        return []
    return [FieldError(path, f"is {value!r}; {remedy}")]


def check_drive_options(
    host: object,
    *,
    name: object,
    now: object,
    monotonic: object,
    rng: object,
    observer: object,
    log: object,
) -> None:
    """Refuse a drive's options, every bad one named at once (``ValidationFailed``)."""
    errors = host_errors(host, clock=now is None, rng=rng is None, monotonic=monotonic is None)
    errors += name_errors(name, "name")
    errors += _function_errors(
        now, "now", "pass a function returning the time as ISO text, or None for the host's clock"
    )
    errors += _function_errors(
        monotonic, "monotonic", "pass a function returning ms, or None for the host's clock"
    )
    if rng is not None and _lacks(rng, "random", "getrandbits"):
        errors.append(
            FieldError(
                "rng",
                f"is {rng!r}; pass a random.Random (it needs random() and getrandbits()), or "
                "None for the host's",
            )
        )
    errors += _function_errors(
        observer, "observer", "pass a function of (event, fields), or None for no events"
    )
    if log is not None and _lacks(log, "warning"):
        errors.append(
            FieldError(
                "log",
                f"is {log!r}; pass a logging.Logger, or None for the drive's own (driver.drive)",
            )
        )
    if errors:
        raise ValidationFailed(errors)
