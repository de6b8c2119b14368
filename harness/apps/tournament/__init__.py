"""Self-improvement tournaments (issue 5): goals as pytest items, iterations on git branches
against a sealed benchmark. See docs/tournament.md for the layout and the loop."""
