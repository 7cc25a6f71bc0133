"""replay/: record a failing frame and replay it under any backend. Not built yet (no issue taken); see README."""
