"""The widgets several lessons use, each returned without being displayed."""
