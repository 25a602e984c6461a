"""The approval lifecycle: runs, requests, decisions, resumes, timeouts (platform-agnostic)."""
