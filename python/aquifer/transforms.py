"""Geometry that follows the loader's augmentation.

The pipeline crops and flips each image; with extras=True (or fields=...)
the loader reports, per output, the crop as fractions of the source image
(x0, y0, x1, y1) and whether it was flipped. follow_crop() applies the same
to boxes given as fractions of the source image, so detection targets stay
on their objects.
"""
import numpy as np


def follow_crop(boxes, crop, flip, min_area=0.0):
    """Boxes [N, 4] (x0, y0, x1, y1, fractions of the source image) as
    fractions of the output image: shifted and scaled into the crop,
    clipped to it, mirrored when flip. Returns (boxes, keep): keep marks the
    boxes whose clipped area is above min_area (a fraction of the output);
    the others lie outside the crop."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    x0, y0, x1, y1 = (float(v) for v in crop)
    w, h = max(x1 - x0, 1e-12), max(y1 - y0, 1e-12)
    out = np.empty_like(b)
    out[:, 0] = (b[:, 0] - x0) / w
    out[:, 2] = (b[:, 2] - x0) / w
    out[:, 1] = (b[:, 1] - y0) / h
    out[:, 3] = (b[:, 3] - y0) / h
    out = np.clip(out, 0.0, 1.0)
    if flip:
        out[:, [0, 2]] = 1.0 - out[:, [2, 0]]
    area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
    return out.astype(np.float32), area > min_area


def pad(arrays, value=0, length=None, dtype=None):
    """Variable-length per-sample arrays (boxes [n_i, 4], token ids [n_i])
    as one batch array [B, N, ...] padded with `value`, N the longest (or
    `length`, cutting longer ones), and the lengths [B]."""
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    if not arrays:
        return np.zeros((0, 0)), np.zeros(0, dtype=np.int64)
    tail = arrays[0].shape[1:]
    for a in arrays:
        if a.shape[1:] != tail:
            raise ValueError(f"pad: samples differ beyond their first dimension: {a.shape[1:]} vs {tail}")
    n = max(a.shape[0] for a in arrays) if length is None else length
    out = np.full((len(arrays), n) + tail, value, dtype=dtype or np.result_type(*arrays))
    lengths = np.zeros(len(arrays), dtype=np.int64)
    for i, a in enumerate(arrays):
        k = min(n, a.shape[0])
        out[i, :k] = a[:k]
        lengths[i] = k
    return out, lengths


def follow_crop_image(mask, crop, flip, size):
    """A per-pixel target of the source image (segmentation mask [H, W] or
    [H, W, C]) through the same crop and flip as the image, resized to
    size x size by nearest neighbour (labels are never blended)."""
    m = np.asarray(mask)
    h, w = m.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in crop)
    centres = (np.arange(size) + 0.5) / size
    xs = np.clip(np.floor((x0 + centres * (x1 - x0)) * w).astype(np.int64), 0, w - 1)
    ys = np.clip(np.floor((y0 + centres * (y1 - y0)) * h).astype(np.int64), 0, h - 1)
    if flip:
        xs = xs[::-1]
    return m[ys][:, xs]
