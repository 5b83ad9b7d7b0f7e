"""Conversions between chat messages and provider / UI formats (spec 11 §11.7)."""
