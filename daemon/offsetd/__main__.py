"""Allow `python -m offsetd`."""

from offsetd.cli import main

main()
