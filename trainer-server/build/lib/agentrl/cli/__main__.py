import sys

from agentrl.cli.main import main

sys.exit(main())
