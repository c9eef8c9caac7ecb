"""One module per console page: each exposes `install(app, console)`, adding its routes."""
