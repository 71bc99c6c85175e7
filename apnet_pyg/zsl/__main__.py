import sys

from apnet_pyg.zsl.cli import main

sys.exit(main())
