"""The command line (`luabridge`, `python -m luabridge`): cli.py's subcommands, repl.py's `th`
prompt and interrupt.py's Ctrl-C for running Lua (their Lua halves: lua/luabridge/th/)."""
