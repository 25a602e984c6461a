"""askhuman: let AI agents ask people for approvals and structured input in chat."""
