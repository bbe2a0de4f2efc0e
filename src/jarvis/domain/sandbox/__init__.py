"""The sandboxed agent's wire: the runner port, the protocol, the host's side, the
container's side and secret masking."""
