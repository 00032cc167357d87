"""Crash consistency: enumerate crash states from the recording I/O layer and check recovery (SPEC section 7)."""
