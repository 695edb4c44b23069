"""`contextkit demo`: an agent session on a bundled sample project."""

__all__: list[str] = []
