"""The model's text protocol: prompt rendering, tool formats and grammars, output parsing."""
