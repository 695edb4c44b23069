"""The aggregate configuration: every sub-config in one container, set once at the root.

`ContextKitConfig` holds the builder's `ContextConfig`, the reducers' `ReducerConfig`, the
compactor's `CompactionConfig` and the window ledger's `WindowBudgetConfig`, and reads and
writes them as plain dicts and YAML. An unknown key or a value of the wrong type is a
`ConfigError` naming the key's full path (``compaction.keep_recnt``). The sections' classes
live in the layers above this module, so they are imported when first needed, never at
import time: imports point one way. A configuration file (every field is optional):

```yaml
context:
  mmr_lambda: 0.6
  source_ratios: {history: 0.4, rag: 0.4, memory: 0.2}
  data_boundary_sections: [rag, tool]
reducer:
  agent_keep_recent_steps: 5
compaction:
  keep_recent: 6
  fidelity: high
window_budget:
  rag_ratio: 0.3
```
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import reprlib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    from langchain_contextkit.agent.window_budget import WindowBudgetConfig
    from langchain_contextkit.compaction import CompactionConfig
    from langchain_contextkit.reducers import ReducerConfig
    from langchain_contextkit.retrieval.budget import ContextConfig

__all__ = ["ContextKitConfig"]

_T = TypeVar("_T")
_NONE = type(None)
_SIMPLE: dict[object, tuple[str, str]] = {
    bool: ("a bool", "bools"),
    int: ("an int", "ints"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
}
"""How an error names a scalar type: singular, plural."""
_SHOW = reprlib.Repr()  # shortens long values in error messages
_SHOW.maxstring = _SHOW.maxother = _SHOW.maxlong = 60


@functools.cache
def _sections() -> dict[str, Any]:
    """Section name -> config class, in field order (imported on first use: see the module)."""
    from langchain_contextkit.agent.window_budget import WindowBudgetConfig  # noqa: PLC0415
    from langchain_contextkit.compaction import CompactionConfig  # noqa: PLC0415
    from langchain_contextkit.reducers import ReducerConfig  # noqa: PLC0415
    from langchain_contextkit.retrieval.budget import ContextConfig  # noqa: PLC0415

    return {
        "context": ContextConfig,
        "reducer": ReducerConfig,
        "compaction": CompactionConfig,
        "window_budget": WindowBudgetConfig,
    }


def _new(section: str) -> Any:  # noqa: ANN401 - a section's config
    """A section's default config."""
    return _sections()[section]()


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextKitConfig:
    """Every sub-configuration of langchain-contextkit in one frozen container.

    Example:
        ```python
        from langchain_contextkit.config import ContextKitConfig
        from langchain_contextkit.errors import ConfigError

        config = ContextKitConfig.from_dict(
            {"context": {"mmr_lambda": 0.5}, "compaction": {"keep_recent": 6}}
        ).for_window(128_000)
        print(config.context.max_tokens, config.context.mmr_lambda, config.compaction.keep_recent)
        # 64000 0.5 6
        assert ContextKitConfig.from_yaml(config.to_yaml()) == config
        try:
            ContextKitConfig.from_dict({"compaction": {"keep_recnt": 6}})
        except ConfigError as error:
            print(str(error).split(";")[0])
        # unknown config key compaction.keep_recnt (did you mean compaction.keep_recent?)
        ```
    """

    context: ContextConfig = field(default_factory=functools.partial(_new, "context"))
    """The context builder's budget knobs (`max_tokens` may stay unset inside an agent)."""

    reducer: ReducerConfig = field(default_factory=functools.partial(_new, "reducer"))
    """How much recent trajectory the reducers keep verbatim."""

    compaction: CompactionConfig = field(default_factory=functools.partial(_new, "compaction"))
    """The history compactor's knobs."""

    window_budget: WindowBudgetConfig = field(
        default_factory=functools.partial(_new, "window_budget")
    )
    """The window ledger's knobs (output reserve, retrieval share)."""

    def __post_init__(self) -> None:
        """Check that each section holds its own config type."""
        for name, section_type in _sections().items():
            value = getattr(self, name)
            if not isinstance(value, section_type):
                msg = f"{name} must be a {section_type.__name__}, got {type(value).__name__}."
                raise ConfigError(msg)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every section as plain data (dicts, lists, str, int, float, bool, None).

        `context.source_ratios` becomes a dict and `context.data_boundary_sections` a
        sorted list (or None), so the result is safe for JSON and YAML.
        """
        return {
            name: {
                item.name: _to_plain(getattr(getattr(self, name), item.name))
                for item in dataclasses.fields(section_type)
            }
            for name, section_type in _sections().items()
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextKitConfig:
        """Build from plain data such as `to_dict` returns.

        Missing sections and fields take their defaults. Ints are accepted where a float is
        expected; a bool is never accepted as a number.

        Args:
            data: A mapping of section name to a mapping of field values.

        Returns:
            The config.

        Raises:
            ConfigError: On an unknown key, a value of the wrong type or out of range; the
                message names the key's full path (``context.mmr_lambda``).
        """
        sections = _sections()
        data = _as_mapping(data, "the config")
        _check_keys(data, sections, "")
        return cls(
            **{
                name: _section_from_dict(section_type, data[name], name)
                for name, section_type in sections.items()
                if name in data
            }
        )

    def to_yaml(self) -> str:
        """The config as a YAML document (`yaml.safe_dump` of `to_dict`), fields in order.

        `from_yaml` reads it back to an equal config. PyYAML's default styles do not
        round-trip every string (a source name holding U+0085 NEL reads back as a space),
        so when the document does not read back to the same data, every scalar is
        double-quoted (with escapes) instead.
        """
        data = self.to_dict()
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        if yaml.safe_load(text) != data:
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_style='"')
        return text

    @classmethod
    def from_yaml(cls, text: str) -> ContextKitConfig:
        """Build from a YAML document (read with `yaml.safe_load`, never the full loader).

        Args:
            text: The YAML text; its top level must be a mapping.

        Returns:
            The config.

        Raises:
            ConfigError: If the text is not valid YAML, its top level is not a mapping, or
                `from_dict` rejects it.
        """
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            msg = f"the config is not valid YAML: {error}"
            raise ConfigError(msg) from error
        return cls.from_dict(data)

    def for_window(
        self,
        context_window: int | None,
        *,
        use_ratio: float = 0.5,
        fallback_window: int | None = None,
    ) -> ContextKitConfig:
        """A copy whose `context.max_tokens` is `use_ratio` of a model's window.

        The other context fields and the other sections are kept (see
        [`ContextConfig.for_window`][langchain_contextkit.retrieval.budget.ContextConfig.for_window]).

        Args:
            context_window: The model's window in tokens; None when unknown.
            use_ratio: Share of the window given to the context.
            fallback_window: The window to assume when `context_window` is None; there is
                no default, an unknown window must be pinned explicitly.

        Returns:
            The new config.

        Raises:
            ConfigError: If the window is unknown and no fallback is given, or the
                resulting budget is out of range.
        """
        context_config = _sections()["context"]
        others = {
            item.name: getattr(self.context, item.name)
            for item in dataclasses.fields(context_config)
            if item.name != "max_tokens"
        }
        context = context_config.for_window(
            context_window, use_ratio=use_ratio, fallback_window=fallback_window, **others
        )
        return dataclasses.replace(self, context=context)


def _field_hints(section_type: type[Any]) -> dict[str, Any]:
    """Field name -> resolved annotation of one section's config class, in field order."""
    hints = typing.get_type_hints(section_type)
    return {item.name: hints[item.name] for item in dataclasses.fields(section_type)}


def _to_plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _to_plain(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return [_to_plain(item) for item in value]
    return value


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _as_mapping(value: object, path: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        msg = f"{path} must be a mapping, got {type(value).__name__} {_SHOW.repr(value)}."
        raise ConfigError(msg)
    return value


def _check_keys(data: Mapping[Any, Any], known: Mapping[str, Any], prefix: str) -> None:
    for key in data:
        if key in known:
            continue
        path = _join(prefix, key)
        close = difflib.get_close_matches(str(key), list(known), n=1)
        hint = f" (did you mean {_join(prefix, close[0])}?)" if close else ""
        where = f"of {prefix}" if prefix else "at the top level"
        msg = f"unknown config key {path}{hint}; known keys {where}: {', '.join(known)}."
        raise ConfigError(msg)


def _section_from_dict(section_type: type[_T], data: object, path: str) -> _T:
    fields = _as_mapping(data, path)
    hints = _field_hints(section_type)
    _check_keys(fields, hints, path)
    values = {
        name: _from_plain(hints[name], value, f"{path}.{name}") for name, value in fields.items()
    }
    try:
        return section_type(**values)
    except ConfigError as error:
        # A range check in the section's own validation: name the section in the message.
        text = str(error)
        named = next((n for n in hints if text.startswith((f"{n} ", f"{n}["))), None)
        msg = f"{path}.{text}" if named else f"{path}: {text}"
        raise ConfigError(msg) from error


def _describe(hint: Any, *, plural: bool = False) -> str:  # noqa: ANN401 - any annotation
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is _NONE else _describe(arg) for arg in args)
    if hint in _SIMPLE:
        return _SIMPLE[hint][plural]
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin in (Mapping, dict):
        keys, items = (_describe(arg, plural=True) for arg in args)
        return f"a mapping of {keys} to {items}"
    return f"a list of {_describe(args[0], plural=True)}"


def _wrong_type(hint: Any, value: object, path: str) -> ConfigError:  # noqa: ANN401
    msg = f"{path} must be {_describe(hint)}, got {type(value).__name__} {_SHOW.repr(value)}."
    return ConfigError(msg)


def _unsupported(hint: Any, path: str) -> TypeError:  # noqa: ANN401
    msg = f"unsupported annotation {hint!r} for {path}: teach config._from_plain about it."
    return TypeError(msg)


def _from_plain(hint: Any, value: object, path: str, shown: Any = None) -> object:  # noqa: ANN401
    """Check `value` against a field's annotation and convert it to the field's type.

    `shown` is the annotation an error names (the whole `X | None`, not just `X`).
    """
    shown = hint if shown is None else shown
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in args if arg is not _NONE]
        if len(options) != 1:
            raise _unsupported(hint, path)
        if value is None and len(options) < len(args):
            return None
        if value is None:
            raise _wrong_type(hint, value, path)
        return _from_plain(options[0], value, path, shown)
    if hint in (bool, int, float, str):
        return _scalar(hint, value, path, shown)
    if origin is typing.Literal:
        if isinstance(value, bool) or value not in args:
            raise _wrong_type(shown, value, path)
        return value
    if origin in (Mapping, dict):
        return _mapping(hint, value, path, shown)
    if origin in (frozenset, set, list) or (origin is tuple and args[-1:] == (Ellipsis,)):
        return _collection(hint, value, path, shown)
    raise _unsupported(hint, path)


def _scalar(hint: type[Any], value: object, path: str, shown: Any) -> object:  # noqa: ANN401
    """A bool, int, str or float; an int is a valid float, a bool is never a number."""
    if isinstance(value, bool) != (hint is bool):
        raise _wrong_type(shown, value, path)
    if hint is float and isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            raise _wrong_type(shown, value, path) from None
    if not isinstance(value, hint):
        raise _wrong_type(shown, value, path)
    return value


def _mapping(hint: Any, value: object, path: str, shown: Any) -> dict[object, object]:  # noqa: ANN401
    if not isinstance(value, Mapping):
        raise _wrong_type(shown, value, path)
    key_hint, item_hint = typing.get_args(hint)
    return {
        _from_plain(key_hint, key, f"{path} key {key!r}"): _from_plain(
            item_hint, item, f"{path}.{key}"
        )
        for key, item in value.items()
    }


def _collection(hint: Any, value: object, path: str, shown: Any) -> object:  # noqa: ANN401
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise _wrong_type(shown, value, path)
    item_hint = typing.get_args(hint)[0]
    items = [_from_plain(item_hint, item, f"{path}[{i}]") for i, item in enumerate(value)]
    return typing.get_origin(hint)(items)
