from policyd.cli.app import main

main()
