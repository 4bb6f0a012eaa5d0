import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while Python starts: no traceback either
    sys.exit(130)

sys.exit(main())
