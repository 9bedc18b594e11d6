from pmutop.cli import main

raise SystemExit(main())
