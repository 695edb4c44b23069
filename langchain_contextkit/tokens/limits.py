"""A chat model's token limits: its window and per-call output cap, from its profile."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "model_limits",
]


def model_limits(llm: object) -> tuple[int | None, int | None]:
    """Read a chat model's window and per-call output limit from its `profile`.

    Args:
        llm: Any LangChain chat model (or anything with a `profile` mapping).

    Returns:
        `(max_input_tokens, max_output_tokens)`, each None when the profile does not say.
    """
    profile = getattr(llm, "profile", None)
    if not isinstance(profile, Mapping):
        return None, None

    def positive(key: str) -> int | None:
        value = profile.get(key)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    return positive("max_input_tokens"), positive("max_output_tokens")
