"""Web framework integrations: ASGI and WSGI middleware."""
