"""The web console: kbus for people, server-rendered HTML over the same client as the API."""
