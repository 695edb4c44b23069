"""The context builder: a Runnable that gathers, ranks and budgets sources into a prompt."""

__all__: list[str] = []
