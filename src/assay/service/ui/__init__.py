"""The results viewer served at `/ui`."""

from assay.service.ui.routes import router

__all__ = ["router"]
