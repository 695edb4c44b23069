"""Validation shared by every configuration: one wording for every bad value."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["check_count", "check_fraction", "from_known_fields", "one_of"]

T = TypeVar("T")


def check_count(name: str, value: object, *, minimum: int) -> None:
    """Refuse anything but an int (bools excluded) of at least `minimum`.

    Raises:
        ConfigError: Naming `name` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{name} must be an int >= {minimum}, got {value!r}."
        raise ConfigError(msg)


def check_fraction(
    name: str, value: float, *, low_open: bool = False, high_open: bool = False
) -> None:
    """Refuse anything but a number in [0, 1] (or the open ends asked for).

    Raises:
        ConfigError: Naming `name`, the interval and the value.
    """
    too_low = value <= 0 if low_open else value < 0
    too_high = value >= 1 if high_open else value > 1
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or too_low
        or too_high
    ):
        low, high = "(0" if low_open else "[0", "1)" if high_open else "1]"
        msg = f"{name} must be in {low}, {high}, got {value!r}."
        raise ConfigError(msg)


def from_known_fields(cls: type[T], data: Mapping[str, Any]) -> T:
    """Build the dataclass `cls` from `data`; an unknown key is an error that names it.

    Raises:
        ConfigError: On an unknown key (or, from `cls` itself, an invalid value).
    """
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        msg = f"unknown {cls.__name__} keys: {unknown}; known: {sorted(known)}."
        raise ConfigError(msg)
    return cls(**data)


def one_of(name: str, given: T | None, alias_name: str, alias: T | None) -> T | None:
    """The argument passed as `name` or as its documented alias, refusing both at once.

    Raises:
        ConfigError: When both are given and differ.
    """
    if given is not None and alias is not None and given is not alias:
        msg = f"pass {name}= once: {alias_name}= is its alias"
        raise ConfigError(msg)
    return given if given is not None else alias
