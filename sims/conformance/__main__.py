"""``python -m sims.conformance``: the reference store, serving the wire on stdin and stdout."""

from ._wire import serve_stdio

serve_stdio()
