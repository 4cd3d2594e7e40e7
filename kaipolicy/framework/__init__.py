"""The session, its hook slots, the statement and the configuration."""
