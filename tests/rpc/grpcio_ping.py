#!/usr/bin/python3
"""A third-party gRPC client for tests/rpc: calls /ferry.Worker/Ping with
Python grpcio, using message classes built at run time from ferry's
FileDescriptorSet (no generated Python code).

usage: grpcio_ping.py ping TARGET DESCRIPTOR_SET NONCE
       grpcio_ping.py echo TARGET DESCRIPTOR_SET SIZE

"ping" calls /ferry.Worker/Ping; "echo" sends a CallRequest with a SIZE-byte
payload, written the way any protobuf library writes it (fields in number
order, no ferry framing), to the test server's /test.Echo/Echo.

Prints the reply as one JSON line on stdout and exits 0. Exits 77 with a
JSON line {"skip": reason} when grpcio or protobuf is missing, and 1 with the
error on stderr when the call fails."""
import json
import sys


def message_classes(desc_path, names):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet()
    with open(desc_path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fdp in fds.file:
        pool.Add(fdp)
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is None:  # protobuf < 4.22
        get_class = message_factory.MessageFactory(pool).GetPrototype
    return [get_class(pool.FindMessageTypeByName(n)) for n in names]


def call_ping(grpc, channel, desc_path, nonce):
    PingRequest, PingReply = message_classes(
        desc_path, ["ferry.PingRequest", "ferry.PingReply"])
    ping = channel.unary_unary(
        "/ferry.Worker/Ping",
        request_serializer=PingRequest.SerializeToString,
        response_deserializer=PingReply.FromString)
    reply = ping(PingRequest(nonce=nonce), timeout=10)
    return {
        "pid": reply.pid,
        "nonce": reply.nonce,
        "version": reply.version,
        "hostname": reply.hostname,
        "device": reply.device,
        "rank": reply.rank,
        "uptime_s": reply.uptime_s,
    }


def call_echo(grpc, channel, desc_path, size):
    (CallRequest,) = message_classes(desc_path, ["ferry.CallRequest"])
    echo = channel.unary_unary(
        "/test.Echo/Echo",
        request_serializer=CallRequest.SerializeToString,
        response_deserializer=CallRequest.FromString)
    payload = bytes((i * 7 + 3) & 0xFF for i in range(size))
    reply = echo(CallRequest(sha256="py", function="echo", payload=payload), timeout=10)
    return {
        "sha256": reply.sha256,
        "function": reply.function,
        "payload_len": len(reply.payload),
        "payload_ok": reply.payload == payload,
        "codec": int(reply.payload_info.codec),
        "raw_size": reply.payload_info.raw_size,
    }


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("ping", "echo"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, target, desc_path, number = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    try:
        import grpc
        import google.protobuf  # noqa: F401
    except ModuleNotFoundError as e:
        # Only a package that is not there: one that is there but broken
        # is a failure, not a reason to skip.
        if e.name not in ("grpc", "google", "google.protobuf"):
            raise
        print(json.dumps({"skip": "%s lacks grpcio/protobuf: %s" % (sys.executable, e)}))
        return 77

    with grpc.insecure_channel(target) as channel:
        try:
            if mode == "ping":
                out = call_ping(grpc, channel, desc_path, number)
            else:
                out = call_echo(grpc, channel, desc_path, number)
        except grpc.RpcError as e:
            print("%s failed: %s: %s" % (mode, e.code(), e.details()), file=sys.stderr)
            return 1
    print(json.dumps(out, separators=(",", ":")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
