"""The store member process: a Raft node driven by asyncio, its peer transport, its client
protocol server and its HTTP endpoints (/health, /metrics)."""
