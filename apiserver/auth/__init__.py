"""Who is making a request: users, and the authenticators that find them (tokens, client certificates)."""
