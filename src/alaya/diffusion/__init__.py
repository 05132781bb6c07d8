"""Schedules, losses and samplers as pure functions (rectified flow; data at t=0, noise at t=1)."""
