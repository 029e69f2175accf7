"""The payer portal sandbox (docs/sandboxes.md): rows per resource and portal slug,
a REST surface, and a server-rendered web portal a browser agent can use.

- `store` / `tables`: the versioned rows store, captured as a pointer `{playground_id, seq}`.
- `datasets`: the `portal` dataset type, checked at create and loaded at start.
- `actions`: list, get, create, patch, set — shared by REST, the pages and `set_portal_row`.
- `priorauth`: a `prior_auth_requests` submission, decided by `assay.sandboxes.payer`.
- `routes` (REST), `web` + `sessions` + `members` + `templates/` (the web portal).
- `surface`: `PortalSandbox`, the package on the `Surface` seam (one line in `registry.py`).
"""

from assay.sandboxes.portal.access import PortalSurface
from assay.sandboxes.portal.actions import create_row, get_row, list_rows, patch_row, seed_portal, set_row
from assay.sandboxes.portal.datasets import check_portal_dataset
from assay.sandboxes.portal.routes import portal_router
from assay.sandboxes.portal.store import BUILT_IN_KEYS, capture_seq, rows_at
from assay.sandboxes.portal.surface import PortalSandbox, PortalView, web_path
from assay.sandboxes.portal.web import portal_web_router

__all__ = [
    "BUILT_IN_KEYS",
    "PortalSandbox",
    "PortalSurface",
    "PortalView",
    "capture_seq",
    "check_portal_dataset",
    "create_row",
    "get_row",
    "list_rows",
    "patch_row",
    "portal_router",
    "portal_web_router",
    "rows_at",
    "seed_portal",
    "set_row",
    "web_path",
]
