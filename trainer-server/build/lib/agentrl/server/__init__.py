"""The trainer server: JSON-RPC 2.0 over WebSocket for editors (spec: protocol/rpc.md)."""
