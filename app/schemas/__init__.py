"""The HTTP API's request and answer types: bodies and queries (pydantic v2, SI units),
the capacity-planning bodies, RFC 9457 problem details, and the human units that the query
strings and the command line accept.

The service validates with these, and the command line shares their bounds and errors.
"""

__all__: list[str] = []
