"""Production implementations of the service port (``driver.ServicePort``).

A handler calls its services through its pass's context (``ctx.call_service``); the drive hands
each call to the port it was given (``JobDriver(..., services=PORT)``). In a simulated world the
port is the world's services; on a real host it is one of these, or one of your own:

- :class:`HttpServices`: each service an HTTP endpoint, called with httpx (on Trio), its
  timeouts, lost connections and status codes mapped to the port's outcomes;
- :class:`InProcessServices`: each service a set of plain functions in this process, for tests
  and for services that live in the process itself.
"""

from ._http import HttpServices, retry_after_ms
from ._in_process import InProcessServices

__all__ = ["HttpServices", "InProcessServices", "retry_after_ms"]
