"""What a session store keeps: the records, the replayed history and the session ids."""
