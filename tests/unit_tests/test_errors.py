import pytest

from langchain_contextkit import (
    ConfigError,
    ContextKitError,
    ContextWindowExceeded,
    TokenizerUnavailableError,
    errors as errors_module,
)


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


def test_every_library_error_lives_in_errors_py() -> None:
    # Issue 18: one error tree. Every ContextKitError subclass any module defines is
    # defined in errors.py, so the tree in its docstring is the whole tree.
    import importlib
    import inspect
    import pkgutil

    import langchain_contextkit

    for info in pkgutil.walk_packages(langchain_contextkit.__path__, "langchain_contextkit."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, ContextKitError):
                assert value.__module__ == errors_module.__name__, (info.name, value)
                assert value.__name__ in errors_module.__all__
