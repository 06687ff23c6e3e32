"""Stand-ins for tests and demos (named as such): a scripted OpenAI-compatible server."""
