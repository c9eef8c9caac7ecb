"""Surface rules, budgets and the files that hold them: what a turn may do and spend."""
