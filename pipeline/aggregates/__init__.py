"""Downstream of the click table: live aggregates (streaming) and daily results (batch)."""
