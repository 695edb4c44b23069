"""The LangChain / LangGraph adapters: window assembler and ledger, middleware, graph nodes."""

__all__: list[str] = []
