"""What a measurement is and where it is kept: the results schema and store."""
