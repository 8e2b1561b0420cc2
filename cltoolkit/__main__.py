from cltoolkit.cli import main

main()
