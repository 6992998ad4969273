"""The one error live capture reports to the user."""


class LiveError(Exception):
    """Live capture cannot start (privileges, interface, filter, missing package): one line for
    the user, exit status 2."""
