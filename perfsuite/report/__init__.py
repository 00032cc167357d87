"""Results into answers: tables, ADR evidence, comparisons, history, plots, dashboard (SPEC section 5)."""
