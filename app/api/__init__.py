"""HTTP edge: routers (thin), dependencies, the error table, middleware."""
