class PatchError(ValueError):
    """A patch that is malformed or cannot be applied; the HTTP layer answers 422."""
