"""Protocol of the deployment runtime: gavel.proto and its committed message stubs (gavel_pb2)."""
