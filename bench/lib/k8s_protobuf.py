"""The size of a discovery.k8s.io/v1 EndpointSlice watch event in the API server's protobuf
encoding (application/vnd.kubernetes.protobuf), the one kube-proxy asks for, computed from the
same JSON objects the stand-in API server sends. Sizes only: nothing here decodes.

Field numbers: k8s.io/api/discovery/v1/generated.proto (EndpointSlice, Endpoint,
EndpointConditions, EndpointPort) and k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto
(ObjectMeta, OwnerReference, WatchEvent), k8s.io/api/core/v1 (ObjectReference). The envelope:
"k8s\\0" then runtime.Unknown{typeMeta{apiVersion, kind}, raw}, and on a watch each event is a
frame of a 4-byte big-endian length (k8s.io/apimachinery/pkg/runtime/serializer/protobuf and
.../framer).
"""
import struct


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _bytes(field, data):
    """A length-delimited field (string, bytes, message); absent when empty, as proto2's
    generated marshallers write an unset optional string: not at all."""
    if isinstance(data, str):
        data = data.encode()
    return _key(field, 2) + _varint(len(data)) + data


def _int(field, n):
    return _key(field, 0) + _varint(n)


def _str(field, s):
    return _bytes(field, s) if s is not None else b""


def _map(field, m):
    return b"".join(_bytes(field, _str(1, k) + _str(2, v)) for k, v in (m or {}).items())


def object_meta(m):
    out = _str(1, m.get("name")) + _str(3, m.get("namespace")) + _str(5, m.get("uid"))
    out += _str(6, m.get("resourceVersion"))
    if "generation" in m:
        out += _int(7, m["generation"])
    if "creationTimestamp" in m:
        out += _bytes(8, _int(1, 1764460800))  # Time{seconds}
    out += _map(11, m.get("labels")) + _map(12, m.get("annotations"))
    for o in m.get("ownerReferences", []):
        out += _bytes(13, _str(1, o["kind"]) + _str(3, o["name"]) + _str(4, o["uid"])
                      + _str(5, o["apiVersion"]) + _int(6, int(o.get("controller", False)))
                      + _int(7, int(o.get("blockOwnerDeletion", False))))
    return out


def endpoint(e):
    out = b"".join(_str(1, a) for a in e.get("addresses", []))
    c = e.get("conditions", {})
    cond = b""
    for n, k in ((1, "ready"), (2, "serving"), (3, "terminating")):
        if k in c:
            cond += _int(n, int(bool(c[k])))
    out += _bytes(2, cond) if cond else b""
    out += _str(3, e.get("hostname"))
    t = e.get("targetRef")
    if t:
        out += _bytes(4, _str(1, t.get("kind")) + _str(2, t.get("namespace"))
                      + _str(3, t.get("name")) + _str(4, t.get("uid")))
    return out + _str(6, e.get("nodeName")) + _str(7, e.get("zone"))


def endpoint_slice(s):
    """`s`: an EndpointSlice as its JSON object (a dict). Returns its protobuf bytes."""
    out = _bytes(1, object_meta(s["metadata"]))
    out += b"".join(_bytes(2, endpoint(e)) for e in s.get("endpoints", []))
    for p in s.get("ports", []):
        out += _bytes(3, _str(1, p.get("name")) + _str(2, p.get("protocol"))
                      + _int(3, p.get("port", 0)))
    return out + _str(4, s.get("addressType"))


def _unknown(api_version, kind, raw):
    return b"k8s\x00" + _bytes(1, _str(1, api_version) + _str(2, kind)) + _bytes(2, raw)


def watch_event_size(type_, s):
    """Bytes on the wire of one watch event of type `type_` ("MODIFIED") carrying EndpointSlice
    `s` (a dict), in the protobuf stream: the 4-byte frame length, the WatchEvent envelope, the
    object's own envelope."""
    obj = _unknown("discovery.k8s.io/v1", "EndpointSlice", endpoint_slice(s))
    event = _unknown("meta.k8s.io/v1", "WatchEvent", _str(1, type_) + _bytes(2, _bytes(1, obj)))
    return len(struct.pack(">I", len(event))) + len(event)
