import pytest

from langchain_contextkit import (
    ConfigError,
    ContextKitError,
    ContextWindowExceeded,
    TokenizerUnavailableError,
)
from langchain_contextkit import errors as errors_module


@pytest.mark.parametrize("error", [ConfigError, TokenizerUnavailableError, ContextWindowExceeded])
def test_every_error_is_a_context_kit_error(error: type[Exception]) -> None:
    assert issubclass(error, ContextKitError)
    assert issubclass(error, Exception)


def test_config_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError, match="bad"):
        raise ConfigError("bad")


def test_context_window_exceeded_carries_the_figures() -> None:
    error = ContextWindowExceeded("must keep 120 tokens, budget 100", required=120, budget=100)
    assert (error.required, error.budget) == (120, 100)
    assert "120" in str(error)


def test_the_docstring_describes_every_error() -> None:
    doc = errors_module.__doc__ or ""
    for name in errors_module.__all__:
        assert name in doc
