"""Routers: parse, call one service, map the result."""
