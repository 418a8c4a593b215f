"""The upload handler: stores a file of up to MAX_UPLOAD_BYTES (10 MiB)."""

MAX_UPLOAD_BYTES = 10 * 1024 * 1024


def handle_upload(size: int) -> int:
    """HTTP status of an upload of ``size`` bytes that reached the app."""
    if size <= 0:
        return 400
    if size > MAX_UPLOAD_BYTES:
        return 413
    return 201
