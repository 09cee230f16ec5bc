from agentcomms.cli import main

main()
