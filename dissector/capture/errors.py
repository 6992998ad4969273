"""The one error the capture readers raise."""


class CaptureError(Exception):
    """A capture that cannot be read (further): one line naming the file and the problem."""
