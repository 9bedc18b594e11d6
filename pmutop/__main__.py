from pmutop.app.main import main

raise SystemExit(main())
