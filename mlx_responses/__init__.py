"""Generated protobuf contract of mlx-responses (see proto/)."""
