"""Generative models: the teacher (now), the streaming student and the world model (next)."""
