"""The X12 clearinghouse sandbox (docs/sandboxes.md): 270→271, 276→277, 278→278 from a payer definition.

`respond` is the whole protocol, pure (bytes in, X12 text out); the HTTP surface and the
exchange records sit above it.
"""

from assay.sandboxes.x12.engine import ENDPOINTS, X12Reply, respond

__all__ = ["ENDPOINTS", "X12Reply", "respond"]
