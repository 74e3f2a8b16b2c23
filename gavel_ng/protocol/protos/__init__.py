"""gavel.proto and its committed message stubs (gavel_pb2); generate.py regenerates them."""
