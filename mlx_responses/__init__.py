"""Generated protobuf contract (see proto/)."""
