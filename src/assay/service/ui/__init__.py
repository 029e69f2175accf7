"""The results viewer served at `/ui` (issue 16)."""

from assay.service.ui.routes import router

__all__ = ["router"]
