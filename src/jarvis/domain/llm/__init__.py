"""What crosses the inference port: messages, the request and the completion."""
