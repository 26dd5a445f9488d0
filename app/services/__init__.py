"""Use cases. Each one opens the unit of work, does its work and commits before returning."""
