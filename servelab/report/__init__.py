"""The run's report, drawn from its data."""
