"""`CompactionConfig`: the serialisable knobs of `HistoryCompactor`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_contextkit.compaction.summarizers import check_fidelity
from langchain_contextkit.errors import ConfigError, check_count, from_known_fields

# Fidelity at run time: `from_known_fields` and `dataclasses.fields` resolve the hints.
from langchain_contextkit.prompts import Fidelity  # noqa: TC001

if TYPE_CHECKING:
    from collections.abc import Mapping


__all__ = ["DEFAULT_TRIGGER_TOKENS", "CompactionConfig"]

DEFAULT_TRIGGER_TOKENS = 2000
"""The seed's trigger for a standalone call whose `trigger_tokens` is None (the default).
In an agent, a None trigger is sized by the window's high- and low-water marks instead
(see `HistoryCompactor`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionConfig:
    """The serialisable knobs of `HistoryCompactor` (see `HistoryCompactor.from_config`).

    Example:
        ```python
        from langchain_contextkit.compaction.compactor import CompactionConfig

        cfg = CompactionConfig.from_dict({"keep_recent": 6})
        assert (cfg.keep_recent, cfg.trigger_tokens) == (6, None)
        assert cfg.standalone_trigger_tokens == 2000  # the seed's trigger
        assert cfg.to_dict()["max_summary_tokens"] == 1000
        ```
    """

    keep_recent: int = 4
    """Recent turns kept verbatim (at least)."""

    trigger_tokens: int | None = None
    """Compact only when the history takes more tokens than this. None: sized by the
    window in an agent, and the seed's `DEFAULT_TRIGGER_TOKENS` (2000) standalone."""

    max_summary_tokens: int = 1000
    """Hard cap of the recap."""

    target_tokens: int | None = None
    """Compact down to this many tokens (default: half the trigger)."""

    fidelity: Fidelity = "medium"
    """What the recap keeps: ``"high"`` details and exact wording, ``"medium"`` every key
    fact and conclusion, ``"low"`` only conclusions and key numbers. A recap that does not
    fit its cap at this tier is written at a lower one before any line is dropped."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_fidelity(self.fidelity)
        check_count("keep_recent", self.keep_recent, minimum=1)
        if self.trigger_tokens is not None:
            check_count("trigger_tokens", self.trigger_tokens, minimum=0)
        check_count("max_summary_tokens", self.max_summary_tokens, minimum=1)
        if self.target_tokens is not None:
            check_count("target_tokens", self.target_tokens, minimum=0)
            if self.target_tokens > self.standalone_trigger_tokens:
                msg = (
                    f"target_tokens ({self.target_tokens}) must not exceed trigger_tokens "
                    f"({self.standalone_trigger_tokens})."
                )
                raise ConfigError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict (JSON- and YAML-friendly; every value stated)."""
        return dataclasses.asdict(self)

    @property
    def sized_by_window(self) -> bool:
        """True when `trigger_tokens` is None: an agent sizes compaction by its window."""
        return self.trigger_tokens is None

    @property
    def standalone_trigger_tokens(self) -> int:
        """The trigger of a standalone call: `trigger_tokens`, or the seed's 2000 if None."""
        return DEFAULT_TRIGGER_TOKENS if self.trigger_tokens is None else self.trigger_tokens

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionConfig:
        """Build from a dict; unknown keys are an error, not silently ignored.

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        return from_known_fields(cls, data)
