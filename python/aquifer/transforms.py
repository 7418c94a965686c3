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
