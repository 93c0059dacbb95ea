"""Bulk history imports."""
