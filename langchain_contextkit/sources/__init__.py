"""Context sources: where the builder and the agent path get their candidates."""

__all__: list[str] = []
