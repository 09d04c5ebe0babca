"""Adaptive Arrow encoder and decoder for OTAP tables (work in progress)."""
