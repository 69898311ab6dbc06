"""Python client of the placement.v1 PlacementService (scheduler-service).

    import grpc
    from placement_client import placement_pb2 as pb, placement_pb2_grpc as pb_grpc
    stub = pb_grpc.PlacementServiceStub(grpc.insecure_channel("127.0.0.1:50051"))

``placement_client.convert`` builds the messages from ``kubernetes.client`` objects.
"""

from placement_client.placement.v1 import placement_pb2, placement_pb2_grpc

__all__ = ["placement_pb2", "placement_pb2_grpc"]
__version__ = "0.1.0"
