"""The composed entry point: the `mlx-responses` command, above both `service` and `http_facade`."""
