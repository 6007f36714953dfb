"""Shared pytest wiring: fixtures live in tests/fixtures/, one module per kind of broker."""

pytest_plugins = [
    "tests.fixtures.coterie_broker",
    "tests.fixtures.reference_broker",
]
