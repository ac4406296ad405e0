"""The agent's side: what agent code builds on a response (next turns, tools, structured output)."""
