"""Quiver: an embeddable, durable Arrow segment store (work in progress)."""
