"""What several test folders share: helpers, never tests (test modules import from here, not from each other)."""
