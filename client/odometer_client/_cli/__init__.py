"""The ``odometer`` command line's commands (entry point: :func:`odometer_client.cli.main`)."""
