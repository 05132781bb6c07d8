"""Prompt encoding (all-MiniLM-L6-v2, offline) with an embedding cache."""

from alaya.text.encoder import PromptEncoder

__all__ = ["PromptEncoder"]
