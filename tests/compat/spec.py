"""Independent implementations of the record formats, written from their
specifications, to check aquifer against something that is not aquifer.

TensorFlow and MXNet cannot be installed here, so this module re-implements
what they do with Debian's python3-protobuf (the real protobuf runtime, for
tf.Example) and python3-crcmod (CRC32C):

- TFRecord framing: tensorflow/core/lib/io/record_writer.cc
- tf.Example: tensorflow/core/example/{example,feature}.proto
- DALI's tfrecord2idx index ("offset size" per record)
- MXNet RecordIO: dmlc-core/src/recordio.cc and mxnet.recordio (IRHeader 'IfQQ')
"""
import struct

import crcmod.predefined
from google.protobuf import descriptor_pb2, descriptor_pool

_crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def crc32c(data: bytes) -> int:
    return _crc32c(data)


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---------------------------------------------------------------- TFRecord
def tfrecord_frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def tfrecord_read(path):
    """Yields (offset, data); raises ValueError on any damage."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0
    while pos < len(buf):
        if pos + 12 > len(buf):
            raise ValueError(f"{path}: truncated header at {pos}")
        (length,) = struct.unpack_from("<Q", buf, pos)
        (lcrc,) = struct.unpack_from("<I", buf, pos + 8)
        if lcrc != masked_crc(buf[pos : pos + 8]):
            raise ValueError(f"{path}: length crc mismatch at {pos}")
        end = pos + 12 + length
        if end + 4 > len(buf):
            raise ValueError(f"{path}: truncated record at {pos}")
        data = buf[pos + 12 : end]
        (dcrc,) = struct.unpack_from("<I", buf, end)
        if dcrc != masked_crc(data):
            raise ValueError(f"{path}: data crc mismatch at {pos}")
        yield pos, data
        pos = end + 4


def tfrecord2idx(path) -> str:
    """DALI's tools/tfrecord2idx: 'offset size' per record, size framed."""
    out = []
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(0)
        current = 0
        while current < size:
            f.seek(current)
            (proto_len,) = struct.unpack("q", f.read(8))
            f.read(4 + proto_len + 4)
            out.append(f"{current} {f.tell() - current}\n")
            current = f.tell()
    return "".join(out)


# ---------------------------------------------------------------- tf.Example
def _example_classes():
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "aquifer_compat/example.proto"
    fdp.package = "tensorflow"
    fdp.syntax = "proto3"
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name, fields, nested=None, oneof=None):
        m = fdp.message_type.add()
        m.name = name
        if oneof:
            m.oneof_decl.add().name = oneof
        for fname, num, ftype, label, type_name, packed, in_oneof in fields:
            f = m.field.add()
            f.name, f.number, f.type, f.label = fname, num, ftype, label
            if type_name:
                f.type_name = type_name
            if packed:
                f.options.packed = True
            if in_oneof:
                f.oneof_index = 0
        if nested:
            nested(m)
        return m

    REP, OPT = T.LABEL_REPEATED, T.LABEL_OPTIONAL
    msg("BytesList", [("value", 1, T.TYPE_BYTES, REP, None, False, False)])
    msg("FloatList", [("value", 1, T.TYPE_FLOAT, REP, None, True, False)])
    msg("Int64List", [("value", 1, T.TYPE_INT64, REP, None, True, False)])
    msg(
        "Feature",
        [
            ("bytes_list", 1, T.TYPE_MESSAGE, OPT, ".tensorflow.BytesList", False, True),
            ("float_list", 2, T.TYPE_MESSAGE, OPT, ".tensorflow.FloatList", False, True),
            ("int64_list", 3, T.TYPE_MESSAGE, OPT, ".tensorflow.Int64List", False, True),
        ],
        oneof="kind",
    )

    def feature_entry(m):
        e = m.nested_type.add()
        e.name = "FeatureEntry"
        e.options.map_entry = True
        k = e.field.add()
        k.name, k.number, k.type, k.label = "key", 1, T.TYPE_STRING, OPT
        v = e.field.add()
        v.name, v.number, v.type, v.label, v.type_name = "value", 2, T.TYPE_MESSAGE, OPT, ".tensorflow.Feature"

    msg("Features", [("feature", 1, T.TYPE_MESSAGE, REP, ".tensorflow.Features.FeatureEntry", False, False)],
        nested=feature_entry)
    msg("Example", [("features", 1, T.TYPE_MESSAGE, OPT, ".tensorflow.Features", False, False)])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    try:
        from google.protobuf import message_factory

        get = getattr(message_factory, "GetMessageClass", None)
        if get is None:
            factory = message_factory.MessageFactory(pool)
            get = factory.GetPrototype
        return get(pool.FindMessageTypeByName("tensorflow.Example")), get(
            pool.FindMessageTypeByName("tensorflow.Feature"))
    except ImportError:  # pragma: no cover
        raise


Example, Feature = _example_classes()


def imagenet_example(image: bytes, label: int, height: int, width: int, filename: str, synset: str, text: str,
                     boxes=()):
    """build_imagenet_data.py's _convert_to_example."""
    ex = Example()
    f = ex.features.feature
    f["image/height"].int64_list.value.append(height)
    f["image/width"].int64_list.value.append(width)
    f["image/colorspace"].bytes_list.value.append(b"RGB")
    f["image/channels"].int64_list.value.append(3)
    f["image/class/label"].int64_list.value.append(label)
    f["image/class/synset"].bytes_list.value.append(synset.encode())
    f["image/class/text"].bytes_list.value.append(text.encode())
    for i, key in enumerate(["xmin", "ymin", "xmax", "ymax"]):
        f["image/object/bbox/" + key].float_list.value.extend([b[i] for b in boxes])
    f["image/object/bbox/label"].int64_list.value.extend([label] * len(boxes))
    f["image/format"].bytes_list.value.append(b"JPEG")
    f["image/filename"].bytes_list.value.append(filename.encode())
    f["image/encoded"].bytes_list.value.append(image)
    return ex


# ---------------------------------------------------------------- RecordIO
MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)


def recordio_frame(data: bytes) -> bytes:
    """dmlc::RecordIOWriter::WriteRecord."""
    out = bytearray()
    lower_align = (len(data) >> 2) << 2
    dptr = 0
    for i in range(0, lower_align, 4):
        if data[i : i + 4] == _MAGIC_BYTES:
            out += _MAGIC_BYTES + struct.pack("<I", ((1 if dptr == 0 else 2) << 29) | (i - dptr))
            out += data[dptr:i]
            dptr = i + 4
    out += _MAGIC_BYTES + struct.pack("<I", ((3 if dptr != 0 else 0) << 29) | (len(data) - dptr))
    out += data[dptr:]
    out += b"\0" * ((-(len(data) - dptr)) % 4)
    return bytes(out)


def recordio_read(path):
    """dmlc::RecordIOReader::NextRecord; yields (offset, payload)."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0
    while pos < len(buf):
        start = pos
        rec = bytearray()
        while True:
            magic, lrec = struct.unpack_from("<II", buf, pos)
            if magic != MAGIC:
                raise ValueError(f"{path}: bad magic at {pos}")
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            pos += 8
            rec += buf[pos : pos + length]
            pos += (length + 3) & ~3
            if cflag in (0, 3):
                break
            rec += _MAGIC_BYTES
        yield start, bytes(rec)


def pack_header(label, id_, id2=0, labels=None) -> bytes:
    """mxnet.recordio.pack's IRHeader ('IfQQ'); multi-label sets flag = count."""
    if labels:
        return struct.pack("IfQQ", len(labels), 0.0, id_, id2) + struct.pack(f"{len(labels)}f", *labels)
    return struct.pack("IfQQ", 0, float(label), id_, id2)


def unpack_header(payload: bytes):
    flag, label, id_, id2 = struct.unpack_from("IfQQ", payload, 0)
    body = payload[24:]
    labels = None
    if flag > 0:
        labels = list(struct.unpack_from(f"{flag}f", body, 0))
        body = body[flag * 4 :]
    return flag, label, id_, id2, labels, body
