"""Research tools that serve only the results tables (docs/results.md): each script's -h says more."""
