"""Workloads: the engine, a peer, or any callable, driven as named operations for recipes (SPEC section 1)."""
