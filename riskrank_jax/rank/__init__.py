"""rank."""
