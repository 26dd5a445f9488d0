"""Pydantic request and response models (the HTTP contract). The accounting core stays the
authority on meaning: request models check shape and type, ``to_declaration`` and
``make_config`` check values."""
