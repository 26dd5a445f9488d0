"""Privacy budget odometer service."""
