"""Thin gRPC servicers: decode, delegate to the core, encode."""
