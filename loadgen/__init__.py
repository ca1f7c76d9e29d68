"""Load generation: ClickEvents and database changes at a controlled rate (Locust)."""
