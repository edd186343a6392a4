"""Helpers the tests share: fixtures' building blocks, servers, clocks, stacks."""

import pkgutil

import pytest

# Their asserts report as those of the test modules and conftest files do (pytest rewrites only
# those by itself). Registered here, before any of them is imported.
pytest.register_assert_rewrite(
    *(f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__))
)
