"""Evaluation: frame metrics, the style classifier, and renderer evaluation with reports."""
