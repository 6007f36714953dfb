"""Shared pytest wiring: fixtures live in tests/fixtures/, one module per kind of server."""

pytest_plugins = [
    "tests.fixtures.coterie_broker",
    "tests.fixtures.postgres",
    "tests.fixtures.coterie_cluster",
    "tests.fixtures.reference_broker",
]
