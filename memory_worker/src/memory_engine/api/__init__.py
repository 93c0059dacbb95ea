"""The memory API v1 as data and pure functions: routes, wire types, checked arguments, OpenAPI."""
