"""streamfold's stages: one module per stage, each a synchronous core plus its async operator."""

__all__: list[str] = []
