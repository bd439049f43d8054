"""Storage failures as the Status a client sees: the registry never lets a StorageError escape."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apiserver import errors
from apiserver.storage.interface import (
    AmbiguousError,
    CompactedError,
    KeyExistsError,
    KeyNotFoundError,
    RevisionConflictError,
    StorageError,
    UnavailableError,
    ValueTooLargeError,
)


@contextlib.contextmanager
def as_status(what: str) -> Iterator[None]:
    """Map a storage failure during `what` ("create pods default/p") to 503, 504, 413, 410 or 500.

    A conflict, a missing or an existing key passes through unchanged: the registry handles
    them (an update without a resourceVersion retries on a concurrent write)."""
    try:
        yield
    except (RevisionConflictError, KeyNotFoundError, KeyExistsError):
        raise  # the registry's own control flow (retry the update, 404, 409), not a failure
    except UnavailableError as e:
        raise errors.unavailable(f"storage is unavailable ({e}); {what} was not applied, retry") from e
    except AmbiguousError as e:
        raise errors.timeout(
            f"{what}: the outcome is unknown ({e}); the write may or may not have been applied, read before retrying"
        ) from e
    except ValueTooLargeError as e:
        # kube answers 500 here (kubernetes#112152, open); the object is the client's doing, so 413
        raise errors.too_large(f"Request entity too large: {what}: the object is too large to store ({e})") from e
    except CompactedError as e:
        raise errors.gone(f"The resourceVersion for the provided list is too old ({e})") from e
    except StorageError as e:
        raise errors.internal(f"{what}: storage error: {e}") from e
