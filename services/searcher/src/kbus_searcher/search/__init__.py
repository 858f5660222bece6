"""The request path: a search from its request to its reply, and the other requests."""
