"""Where the services run: the ``Stack`` interface, its local and compose implementations,
the local process launchers, and the instructor's run on the Chameleon node."""
