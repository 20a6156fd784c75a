"""The jobs app's pages and HTMX fragments: the New job form, the job page and its actions, My jobs' fragments and their ETags. Thin: parse input, call one service or selector, render."""
