"""What-if tuning: replay event traces in virtual time through the engine's real schedulers (SPEC section 6)."""
