"""History compaction: summarise an old conversation, keep recent turns verbatim."""

__all__: list[str] = []
