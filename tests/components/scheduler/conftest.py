from tests.components.conftest import cluster  # noqa: F401
