"""One module per ``askhuman`` sub-command; each exposes ``register(app)``."""
