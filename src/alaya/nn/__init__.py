"""Shared neural-network layers."""
