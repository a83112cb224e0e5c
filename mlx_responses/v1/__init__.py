"""Generated code of the mlx_responses.v1 package."""
