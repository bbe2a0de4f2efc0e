"""What a run takes, reports while it happens and returns: its contract, its updates and its
events."""
