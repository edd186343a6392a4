"""Helpers the tests share: fixtures' building blocks, servers, clocks, stacks."""
