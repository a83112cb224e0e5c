"""HTTP tests (a package, so module names like test_tool_formats may repeat across folders)."""
