"""A throwaway eighth surface, `notes`, built only from the registry's recipe (docs/architecture.md)."""

from tests.sandboxes.eighth_surface.surface import NotesSandbox

__all__ = ["NotesSandbox"]
