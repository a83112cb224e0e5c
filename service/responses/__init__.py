"""Per core: the response pipeline — validation, history, jobs, events, persistence."""
