"""The harness's tools, each a thin shell over the core (cmharness): its arguments, its own
parsing, its report. `harness/NAME` (or `build/bin/cm-price`) is a launcher of a few lines that
runs `main()` of the module here; nothing in the core imports a tool."""
