"""`python -m coterie` runs the command line."""

from coterie.cli.main import main

main()
