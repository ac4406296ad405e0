"""One converter per wire format: provider event dicts -> :class:`pipeline.models.ChunkResponse`."""

__all__: list[str] = []
