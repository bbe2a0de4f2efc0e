"""Adapters: the ports implemented over real technology. Only the container imports them."""
